package command

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/idempotency"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/route"
)

// memory.set, top to bottom. set parses the request (newSetWrite) and runs the write in
// admission rounds (runSet); each round (setRound) runs the stages in order, a file
// each, in the order of the documented steps (docs/architecture.md, "The steps of
// memory.set"):
//
//  1. set_1_round.go   the round: the namespace's policy and the key's heads, read in
//     one round trip (step 2), and the loop that runs another round;
//  2. set_2_admit.go   admit: type, guards, value, expiry, proposals and preconditions,
//     the row (steps 1, 3-7);
//  3. set_3_judge.go   judge: embed the value, read its peers, the verdict (steps 8-10);
//     on a network embedder the call starts before the round's read when it can
//     (set_3_embed_ahead.go);
//  4. set_4_rows.go    rows: the write's own row and the copies of the heads its verdict
//     changes;
//  5. set_5_gap.go     the gap check: the revisions committed since the round's capture,
//     checked under the commit's lock (a dry run checks them and stops: step 11);
//  6. set_6_commit.go  commit: one transaction, grouped with the namespace's other
//     writes in flight, and what came back (step 12).
//
// memory.update, memory.update_by_id (update.go), memory.bulk_set (bulk.go) and
// memory.import (import.go) run the same stages; every other writer commits through
// stage 6.

// setRequest is the body of PUT /v1/namespaces/{ns}/memories/{key} (memory.set).
// Absent optional fields carry the head's values forward on a revision.
type setRequest struct {
	Value         json.RawMessage    `json:"value"`
	Agent         string             `json:"agent"`
	UserID        string             `json:"user_id"`
	SessionID     string             `json:"session_id"`
	MemoryType    string             `json:"memory_type"`
	Tags          []string           `json:"tags"`
	Confidence    *float64           `json:"confidence"`
	Pin           bool               `json:"pin"`
	TTLSeconds    *int               `json:"ttl_seconds"`
	ValidAt       *time.Time         `json:"valid_at"`
	ValidTo       *time.Time         `json:"valid_to"`
	Sensitivity   memrow.Sensitivity `json:"sensitivity"`
	Proposed      bool               `json:"proposed"`
	IfMatchSHA256 string             `json:"if_match_sha256"`
	SourceClass   string             `json:"source_class"`
	DryRun        bool               `json:"dry_run"`
	// Entities are names, or {"name", "type"} objects; Relations the facts the value
	// states. Both describe the value: left out, a revision of a new value states
	// none, and one of the same value keeps the head's.
	Entities  []json.RawMessage      `json:"entities"`
	Relations []memrow.RelationInput `json:"relations"`
}

// Source classes. The server stamps direct; a request may only downgrade.
const (
	SourceDirect   = "direct"
	SourceDerived  = "derived"
	SourceExternal = "external"
	SourceImported = "imported"
)

// setAnswer is what memory.set answers: what was written (or not) and why.
type setAnswer struct {
	MemoryID           string             `json:"memory_id"`
	Namespace          string             `json:"namespace"`
	MemoryKey          string             `json:"memory_key"`
	Agent              string             `json:"agent"`
	UserID             string             `json:"user_id"`
	SessionID          string             `json:"session_id"`
	Version            int64              `json:"version"`
	VersionText        string             `json:"version_text"`
	Seq                int64              `json:"seq"`
	ContentSHA256      string             `json:"content_sha256"`
	ReinforcementCount int                `json:"reinforcement_count"`
	Event              string             `json:"event,omitempty"`
	Written            bool               `json:"written"`
	DryRun             bool               `json:"dry_run,omitempty"`
	Verdict            Verdict            `json:"verdict"`
	Status             memrow.Status      `json:"status"`
	MemoryType         string             `json:"memory_type"`
	RetypedFrom        string             `json:"retyped_from,omitempty"`
	Sensitivity        memrow.Sensitivity `json:"sensitivity"`
	Pinned             bool               `json:"pinned"`
	ExpiresAt          *time.Time         `json:"expires_at,omitempty"`
	OnExpire           string             `json:"on_expire,omitempty"`
	MergedInto         *judgedPeer        `json:"merged_into,omitempty"`
	DuplicateOf        string             `json:"duplicate_of,omitempty"`
	ConflictWith       []string           `json:"conflict_with,omitempty"`
	Superseded         []string           `json:"superseded,omitempty"`
	Peers              []judgedPeer       `json:"peers"`
	Advisories         []string           `json:"advisories,omitempty"`
}

// keyWrite is a write of one key the route names: memory.set and memory.update.
type keyWrite struct {
	origin
	namespace, key string
	body           *setRequest
}

// setWrite is one write's request, parsed, and its state across admission rounds.
type setWrite struct {
	op string // memory.set, memory.update, memory.update_by_id
	// requireHead: the op revises an existing row (404 when the key has no live head);
	// a write with no value of its own keeps the head's.
	requireHead   bool
	valueFromHead bool
	p             auth.Principal
	req           *setRequest
	id            memrow.Identity
	value         []byte
	sha           string
	valueText     string
	detected      []string // sensitive kinds the detector found
	vector        []float32
	keyVector     []float32
	chunkVectors  [][]float32
	requestID     string
	ahead         *embedAhead // the embedding call started before the first round's read
	absorbed      []peer      // gap rows measured in earlier rounds
	hold          *idempotency.Hold
	// skipUnchanged: an entry that repeats its head's stored row is refused
	// (memory.bulk_set's skipped_unchanged) rather than restated.
	skipUnchanged bool

	// entities and entityTypes are the request's entities, parsed; nil when it named none.
	entities    []string
	entityTypes map[string]string
	// keepGraph: entities and relations the request leaves out keep the head's, even
	// over a new value (memory.update).
	keepGraph bool
	// requireProposal: the write accepts the key's live proposal, and nothing else
	// (memory.proposal_decide).
	requireProposal bool
	// readHeads: a round on predicted heads did not commit; every round reads them.
	readHeads bool
}

// set is memory.set: it writes a new version of the key's value, as the admission
// rules judge it (the stages above).
func (s *Service) set(ctx context.Context, p auth.Principal, r keyWrite) (*setAnswer, error) {
	if len(r.body.Value) == 0 {
		return nil, httperr.Validation("value", "value is required (any JSON value)")
	}
	id, other, err := route.WriteIdentity(p, r.namespace, r.key, r.body.names())
	if err != nil {
		return nil, err
	}
	if other {
		return nil, otherUser()
	}
	w, err := newSetWrite("memory.set", p, id, r.body, r.requestID)
	if err != nil {
		return nil, err
	}
	w.hold = r.hold
	return s.runSet(ctx, w)
}

// runSet runs a prepared write through its admission rounds.
func (s *Service) runSet(ctx context.Context, w *setWrite) (*setAnswer, error) {
	w.ahead = s.startEmbedAhead(ctx, w)
	var ans *setAnswer
	err := s.admitRounds(func(gapFrom int64) (bool, int64, error) {
		a, next, err := s.setRound(ctx, w, gapFrom)
		ans = a
		return a != nil, next, err
	})
	if err == nil {
		s.countEvidence(w.id.Org, w.id.Namespace, ans)
	}
	return ans, err
}

// setRound reads the policy and the key's heads as they are now, runs the admission
// rules over them and commits. It answers, fails, or returns the seq the next round's
// gap check starts after. A write of a key this process knows of no head for first
// runs without the read, on what it predicts (set_1_predict.go); unless that commits,
// the round runs again on what it reads.
func (s *Service) setRound(ctx context.Context, w *setWrite, gapFrom int64) (*setAnswer, int64, error) {
	if st := s.predictRound(w, gapFrom); st != nil {
		ans, next, err := s.judgeRound(ctx, w, gapFrom, st)
		if !errors.Is(err, errUnpredicted) && (ans != nil || err != nil) {
			return ans, next, err
		}
		w.readHeads = true
		gapFrom = max(gapFrom, next)
	}
	st, err := s.readRound(ctx, w.id.Org, w.id.Namespace, []string{w.id.MemoryKey}, nil, nil, true)
	if err != nil {
		return nil, 0, httperr.Store("reading the namespace policy and the key's heads", err)
	}
	return s.judgeRound(ctx, w, gapFrom, st)
}

// judgeRound runs the admission rules over a round's state and commits.
func (s *Service) judgeRound(ctx context.Context, w *setWrite, gapFrom int64, st *roundState) (*setAnswer, int64, error) {
	now := s.now()
	gapFrom = max(gapFrom, st.capture)
	// An answer that commits nothing stands on the namespace's current policy only;
	// else another round reads it. Nor on predicted heads: the commit did not check
	// them, so the round runs again on the heads it reads.
	uncommitted := func(ans *setAnswer, err error) (*setAnswer, int64, error) {
		if st.predicted {
			return nil, gapFrom, errUnpredicted
		}
		if ok, serr := s.policyStands(ctx, w.id.Org, w.id.Namespace, st); serr != nil || !ok {
			return nil, gapFrom, serr
		}
		return ans, 0, err
	}
	e := &entry{w: w, keyHeads: st.keyHeads[w.id.MemoryKey]}
	e.head = headOf(e.keyHeads, w.id)
	if err := w.overHead(e.head, now); err != nil {
		return nil, 0, err
	}
	rules := s.rulesOf(st)
	d, ref := admit(e, now, rules)
	if ref != nil {
		return uncommitted(nil, ref)
	}
	e.draft = d
	if err := s.embedEntries(ctx, []*entry{e}, "embedding the value"); err != nil {
		return nil, 0, err
	}
	peers, err := s.setPeers(ctx, e, rules, st.fromIndex)
	if errors.Is(err, errPeersMoved) {
		return nil, gapFrom, nil
	}
	if err != nil {
		return nil, 0, err
	}
	if e.v, ref = judge(e, peers, rules); ref != nil {
		return uncommitted(nil, ref)
	}
	if e.v.kind == VerdictMerge {
		ans := setAnswerOf(e, nil)
		ans.DryRun = w.req.DryRun
		return uncommitted(ans, nil)
	}
	rows, superseded := writeJudgedRows(w.op, e, rules.conflictPolicy(), now)
	plan := &commitPlan{org: w.id.Org, namespace: w.id.Namespace, rows: rows, requestID: w.requestID,
		policyGeneration: st.policy.generation, gapFrom: gapFrom, idem: w.hold, keyHeads: keyHeadsOf(w.id.MemoryKey, e.keyHeads)}
	if e.seeksPeers(rules.conflictPolicy()) {
		plan.gapCheck = s.gapCheck(e.peerQuery(), w.sha, e.v.peersJudged(), e.threshold)
	}
	// Under an Idempotency-Key the commit stores the answer it stamps, the very one
	// this write answers (so a replay's bytes are the answer's).
	var stored *setAnswer
	if w.hold != nil && !w.req.DryRun {
		plan.answer = func() any {
			stored = committedSetAnswer(e, rows, superseded)
			return stored
		}
	}
	retry, next, err := s.commitRound(ctx, plan, w.req.DryRun, "this write against its peers", func(g *errGap) error {
		measured, err := s.measureGap(ctx, e.peerQuery(), g)
		w.absorbed = mergePeers(w.absorbed, measured)
		return err
	})
	if err != nil || retry {
		return nil, next, err
	}
	if w.req.DryRun {
		ans := setAnswerOf(e, superseded)
		ans.DryRun = true
		return uncommitted(ans, nil)
	}
	if stored != nil {
		return stored, 0, nil
	}
	return committedSetAnswer(e, rows, superseded), 0, nil
}

// committedSetAnswer is a committed write's answer: its verdict and peers, and the
// version and seq its commit stamped on its row.
func committedSetAnswer(e *entry, rows []*pending, superseded []string) *setAnswer {
	ans := setAnswerOf(e, superseded)
	ans.Written, ans.Event = true, string(rows[0].event)
	ans.Version, ans.VersionText, ans.Seq = e.row.Version, memrow.VersionText(e.row.Version), e.row.Seq
	return ans
}

// newSetWrite validates a write of one key and prepares its value, when it has one.
func newSetWrite(op string, p auth.Principal, id memrow.Identity, req *setRequest, requestID string) (*setWrite, error) {
	if err := id.Validate(); err != nil {
		return nil, err
	}
	if err := validateSetFields(req); err != nil {
		return nil, err
	}
	w := &setWrite{op: op, p: p, req: req, id: id, requestID: requestID}
	if req.Entities != nil {
		names, types, err := memrow.ParseEntities(req.Entities)
		if err != nil {
			return nil, err
		}
		w.entities, w.entityTypes = names, types
	}
	if len(req.Value) > 0 {
		value, err := memrow.Canonical("value", req.Value)
		if err != nil {
			return nil, err
		}
		w.setValue(value)
	}
	return w, nil
}

// setValue fixes the write's value and what is derived from its text.
func (w *setWrite) setValue(canonical []byte) {
	w.value, w.sha, w.valueText = canonical, memrow.ContentSHA256(canonical), memrow.ValueText(canonical)
	w.detected = detectSensitive(w.valueText + " " + w.id.MemoryKey)
	w.vector, w.keyVector, w.chunkVectors = nil, nil, nil
}

func validateSetFields(req *setRequest) error {
	if req.Tags != nil {
		if err := memrow.ValidateTags(req.Tags); err != nil {
			return err
		}
	}
	if req.Confidence != nil {
		if err := memrow.ValidateConfidence(*req.Confidence); err != nil {
			return err
		}
	}
	if req.MemoryType != "" {
		if err := memrow.ValidateName("memory_type", req.MemoryType); err != nil {
			return err
		}
	}
	if req.TTLSeconds != nil && *req.TTLSeconds <= 0 {
		return httperr.Validation("ttl_seconds", "ttl_seconds must be positive")
	}
	if req.ValidAt != nil && req.ValidTo != nil && !req.ValidTo.After(*req.ValidAt) {
		return httperr.Validation("valid_to", "valid_to must be after valid_at")
	}
	switch req.Sensitivity {
	case "", memrow.SensitivityNormal, memrow.SensitivityHigh:
	default:
		return httperr.Validation("sensitivity", "sensitivity must be normal or high")
	}
	switch req.SourceClass {
	case "", SourceDirect, SourceDerived, SourceExternal, SourceImported:
	default:
		return httperr.Validation("source_class", "a request may only downgrade source_class: derived, external or imported")
	}
	if req.IfMatchSHA256 != "" && len(req.IfMatchSHA256) != 64 {
		return httperr.Validation("if_match_sha256", "if_match_sha256 must be 64 hex characters")
	}
	if req.Proposed && req.Pin {
		return httperr.Validation("pin", "a proposal cannot pin")
	}
	return memrow.ValidateRelations(req.Relations)
}

func (r *setRequest) names() route.Names {
	return route.Names{Agent: r.Agent, UserID: r.UserID, SessionID: r.SessionID}
}

func decodeSet(body []byte) (*setRequest, error) {
	var req setRequest
	if err := httperr.DecodeBody(body, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

// setAnswerOf is what memory.set answers of an entry it judged, before any commit: its
// row as it stands, the verdict and what it did to the peers (superseded).
func setAnswerOf(e *entry, superseded []string) *setAnswer {
	row, v := e.row, e.v
	ans := &setAnswer{
		MemoryID: row.MemoryID, Namespace: row.Namespace, MemoryKey: row.MemoryKey,
		Agent: row.Agent, UserID: row.UserID, SessionID: row.SessionID,
		ContentSHA256: row.ContentSHA256, ReinforcementCount: row.ReinforcementCount,
		VersionText: "0", Verdict: v.kind, Status: row.Status, MemoryType: row.MemoryType, RetypedFrom: e.retypedFrom,
		Sensitivity: row.Sensitivity, Pinned: row.Pinned, ExpiresAt: row.ExpiresAt, OnExpire: row.OnExpire,
		Peers: nonNilJudged(v.judged), Advisories: e.advisories, Superseded: superseded,
	}
	switch v.kind {
	case VerdictMerge:
		ans.MergedInto = judgedOf(v.target)
	case VerdictDuplicate:
		ans.DuplicateOf = v.target.MemoryID
	case VerdictConflict:
		for _, p := range v.conflicts {
			ans.ConflictWith = append(ans.ConflictWith, p.MemoryID)
		}
	}
	return ans
}

func (a *setAnswer) committed() bool { return a.Written }

func (a *setAnswer) outcome() string {
	switch {
	case a.DryRun:
		return "dry_run"
	case !a.Written:
		return string(a.Verdict)
	}
	return "ok"
}

func judgedOf(r *memrow.Row) *judgedPeer {
	return &judgedPeer{MemoryID: r.MemoryID, MemoryKey: r.MemoryKey, Agent: r.Agent, UserID: r.UserID, SessionID: r.SessionID, Cosine: 1, Verdict: VerdictMerge}
}

func nonNilJudged(j []judgedPeer) []judgedPeer {
	if j == nil {
		return []judgedPeer{}
	}
	return j
}

func outcomeOf(err error) string {
	var he *httperr.Error
	if errors.As(err, &he) {
		if he.Status >= 500 {
			return "error"
		}
		return "refused"
	}
	var fe *memrow.FieldError
	if errors.As(err, &fe) {
		return "refused"
	}
	return "error"
}
