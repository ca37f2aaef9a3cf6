package command

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/text"
)

// setRequest is the body of PUT /v1/namespaces/{ns}/memories/{key} (memory.set).
// Absent optional fields carry the head's values forward on a revision.
type setRequest struct {
	Value         json.RawMessage `json:"value"`
	Agent         string          `json:"agent"`
	UserID        string          `json:"user_id"`
	SessionID     string          `json:"session_id"`
	MemoryType    string          `json:"memory_type"`
	Tags          []string        `json:"tags"`
	Confidence    *float64        `json:"confidence"`
	Pin           bool            `json:"pin"`
	TTLSeconds    *int            `json:"ttl_seconds"`
	ValidAt       *time.Time      `json:"valid_at"`
	ValidTo       *time.Time      `json:"valid_to"`
	Sensitivity   string          `json:"sensitivity"`
	Proposed      bool            `json:"proposed"`
	IfMatchSHA256 string          `json:"if_match_sha256"`
	SourceClass   string          `json:"source_class"`
	DryRun        bool            `json:"dry_run"`
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
	MemoryID           string       `json:"memory_id"`
	Namespace          string       `json:"namespace"`
	MemoryKey          string       `json:"memory_key"`
	Agent              string       `json:"agent"`
	UserID             string       `json:"user_id"`
	SessionID          string       `json:"session_id"`
	Version            int64        `json:"version"`
	VersionText        string       `json:"version_text"`
	Seq                int64        `json:"seq"`
	ContentSHA256      string       `json:"content_sha256"`
	ReinforcementCount int          `json:"reinforcement_count"`
	Event              string       `json:"event,omitempty"`
	Written            bool         `json:"written"`
	DryRun             bool         `json:"dry_run,omitempty"`
	Verdict            string       `json:"verdict"`
	Status             string       `json:"status"`
	MemoryType         string       `json:"memory_type"`
	RetypedFrom        string       `json:"retyped_from,omitempty"`
	Sensitivity        string       `json:"sensitivity"`
	Pinned             bool         `json:"pinned"`
	ExpiresAt          *time.Time   `json:"expires_at,omitempty"`
	OnExpire           string       `json:"on_expire,omitempty"`
	MergedInto         *judgedPeer  `json:"merged_into,omitempty"`
	DuplicateOf        string       `json:"duplicate_of,omitempty"`
	ConflictWith       []string     `json:"conflict_with,omitempty"`
	Superseded         []string     `json:"superseded,omitempty"`
	Peers              []judgedPeer `json:"peers"`
	Advisories         []string     `json:"advisories,omitempty"`
}

func (s *Service) handleSet(c *fiber.Ctx) error {
	return s.measured(c, "memory.set", func(hold *idemHold) (any, error) { return s.set(c, hold) })
}

// setWrite is one memory.set's state across its phases and admission rounds.
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
	embedded      bool
	requestID     string
	absorbed      []peer // gap rows measured in earlier rounds
	advisories    []string
	hold          *idemHold

	// entities and entityTypes are the request's entities, parsed; nil when it named none.
	entities    []string
	entityTypes map[string]string
	// keepGraph: entities and relations the request leaves out keep the head's, even
	// over a new value (memory.update).
	keepGraph bool
}

func (s *Service) set(c *fiber.Ctx, hold *idemHold) (*setAnswer, error) {
	w, err := s.parseSet(c)
	if err != nil {
		return nil, err
	}
	w.hold = hold
	return s.runSet(c.UserContext(), w)
}

// runSet runs a prepared write through its admission rounds.
func (s *Service) runSet(ctx context.Context, w *setWrite) (*setAnswer, error) {
	deadline := s.now().Add(s.cfg.AdmissionDeadline)
	gapFrom := int64(-1)
	for round := 0; round < s.cfg.AdmissionRounds; round++ {
		if round > 0 && s.now().After(deadline) {
			break
		}
		ans, next, err := s.setRound(ctx, w, gapFrom)
		if err != nil || ans != nil {
			return ans, err
		}
		gapFrom = next
	}
	return nil, contended(errHeadMoved)
}

// parseSet checks the request itself: everything that does not depend on the
// namespace's policy or the key's head.
func (s *Service) parseSet(c *fiber.Ctx) (*setWrite, error) {
	p, ns, err := routeNamespace(c, mayWrite)
	if err != nil {
		return nil, err
	}
	key, err := routeKey(c)
	if err != nil {
		return nil, err
	}
	req, err := decodeSet(c.Body())
	if err != nil {
		return nil, err
	}
	if len(req.Value) == 0 {
		return nil, httperr.Validation("value", "value is required (any JSON value)")
	}
	id := memrow.Identity{Org: p.Org, Namespace: ns, Agent: orDash(req.Agent), UserID: orDash(req.UserID),
		SessionID: orDash(req.SessionID), MemoryKey: key}
	if p.ReadUserID != "" {
		if req.UserID == "" {
			id.UserID = p.ReadUserID
		} else if req.UserID != p.ReadUserID {
			return nil, otherUser()
		}
	}
	return newSetWrite("memory.set", p, id, req, c.Get("X-Request-Id"))
}

// newSetWrite validates a write of one key and prepares its value, when it has one.
func newSetWrite(op string, p auth.Principal, id memrow.Identity, req *setRequest, requestID string) (*setWrite, error) {
	if err := validateIdentity(id); err != nil {
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

// setRound runs the phases over the policy and head as they are now and commits. It
// answers, fails, or returns the seq the next round's gap check starts after.
func (s *Service) setRound(ctx context.Context, w *setWrite, gapFrom int64) (*setAnswer, int64, error) {
	now := s.now()
	// Phase 2: the policy, the key's heads under every identity (its own head among
	// them) and the capture the verdict's peer read is covered by, in one round trip.
	st, err := s.readRound(ctx, w.id)
	if err != nil {
		return nil, 0, httperr.Store("reading the namespace policy and the key's heads", err)
	}
	pol, head := st.policy, st.head
	gapFrom = max(gapFrom, st.watermark)
	live := head != nil && head.Live(now)
	if w.requireHead && !live {
		return nil, 0, httperr.NotFound("memory not found")
	}
	if w.valueFromHead && (w.value == nil || w.sha != head.ContentSHA256) {
		w.setValue(head.Value)
	}

	// Phase 1: the type, through the namespace's retype.
	memoryType, retypedFrom := w.req.MemoryType, ""
	if memoryType == "" {
		memoryType = memrow.DefaultMemoryType
		if live {
			memoryType = head.MemoryType
		}
	}
	if to := pol.config.typeConfig(memoryType).Retype; to != "" {
		memoryType, retypedFrom = to, memoryType
	}
	typeCfg := pol.config.typeConfig(memoryType)

	// Phase 3: guards. The same bytes over the live established value are a
	// restatement; a changed value meets the lock, then the pin.
	restatement := live && head.Established(now) && head.ContentSHA256 == w.sha
	if live && !restatement && head.ContentSHA256 != w.sha {
		if head.Locked {
			return nil, 0, locked("write")
		}
		if head.Pinned && !w.req.Pin {
			return nil, 0, pinnedConflict("the key holds a pinned value; write with pin=true to replace it")
		}
	}

	// Phase 5 (value): the char limit, the blacklist and the sensitivity tier.
	limit := s.cfg.CharLimit
	if typeCfg.CharLimit > 0 {
		limit = typeCfg.CharLimit
	}
	if err := memrow.CheckCharLimit(w.value, limit); err != nil {
		return nil, 0, err
	}
	if _, hit := pol.blacklisted(w.valueText); hit {
		return nil, 0, httperr.New(http.StatusUnprocessableEntity, CodeBlacklisted, "the value matches a blacklisted pattern of the namespace").With("field", "value")
	}
	sensitivity := memrow.SensitivityNormal
	if len(w.detected) > 0 || w.req.Sensitivity == memrow.SensitivityHigh {
		sensitivity = memrow.SensitivityHigh
	}
	if len(w.detected) > 0 && w.req.Sensitivity == memrow.SensitivityNormal {
		w.advise("sensitivity_kept: the detector found " + w.detected[0] + "; a request may raise the tier, not lower it")
	}

	// Phase 4: expiry.
	exp := resolveExpiry(expiryInput{now: now, ttlSeconds: w.req.TTLSeconds, validTo: w.req.ValidTo, typeConfig: typeCfg,
		namespace: pol.config, high: sensitivity == memrow.SensitivityHigh, sensitiveRetention: s.cfg.SensitiveRetention})
	if live && head.Locked {
		// A locked row keeps its expiry: a retention window does not move it, and a
		// write that asks to move it is refused.
		if (w.req.TTLSeconds != nil || w.req.ValidTo != nil) && !sameTime(exp.at, head.ExpiresAt) {
			return nil, 0, locked("expire")
		}
		exp = expiry{at: head.ExpiresAt, onExpire: head.OnExpire}
	}

	// Phase 6: proposals and preconditions.
	if w.req.Proposed && keyHoldsFact(st.keyHeads, now) {
		return nil, 0, httperr.New(http.StatusConflict, CodeKeyHoldsFact, "a proposal may not replace the key's established fact")
	}
	if w.req.IfMatchSHA256 != "" && (!live || head.ContentSHA256 != w.req.IfMatchSHA256) {
		return nil, 0, httperr.New(http.StatusConflict, CodePreconditionFailed, "if_match_sha256 does not match the live value")
	}

	// Phase 7: the version row, with provenance stamped by the server.
	row := s.buildSetRow(w, head, now, memoryType, sensitivity, exp, &pol.config)
	// An update that leaves the value as it is changes metadata only: the row keeps
	// its status, links and reinforcement, and is not judged again.
	metaOnly := w.requireHead && live && head.ContentSHA256 == w.sha
	switch {
	case metaOnly:
		row.ReinforcementCount, row.Status, row.ConflictWith = head.ReinforcementCount, head.Status, head.ConflictWith
		row.DuplicateOf, row.SupersededBy, row.JudgementOwed = head.DuplicateOf, head.SupersededBy, head.JudgementOwed
		restatement = true
	case restatement:
		row.ReinforcementCount = head.ReinforcementCount + 1
		row.Status = head.Status
		row.ConflictWith = head.ConflictWith
	case w.requireHead && live && head.Status == memrow.StatusProposed:
		row.Status = memrow.StatusProposed // an update revises a proposal; it does not accept it
	}
	// Phases 8 and 9: only an embedded row has a search document; its value and key
	// words are embedded once, in one call, and reused by every round.
	w.embedded = row.Embedded()
	if w.embedded && w.vector == nil {
		if err := s.embedSet(ctx, w); err != nil {
			return nil, 0, err
		}
	}
	if w.embedded {
		row.EmbeddingModel, row.EmbeddingDim = s.embedder.Model(), len(w.vector)
	} else {
		row.EmbeddingModel, row.EmbeddingDim = "", 0
	}

	// Phase 10: the verdict against the peers.
	v := verdict{kind: VerdictRestatement}
	q := peerQuery{id: w.id, memoryType: memoryType, vector: w.vector, readUserID: w.p.ReadUserID}
	threshold := s.threshold(pol.config, typeCfg)
	if !restatement {
		var peers []peer
		if w.embedded && pol.config.ConflictPolicy != PolicyAppendOnly {
			peers, err = s.readPeers(ctx, q)
			if err != nil {
				return nil, 0, chUnavailable("reading the write's peers", err)
			}
		}
		peers = mergePeers(peers, w.absorbed)
		v = decide(verdictInput{row: row, valueText: w.valueText, policy: pol.config.ConflictPolicy,
			threshold: threshold, duplicateThreshold: s.cfg.DuplicateThreshold, peers: peers})
	}
	ans := s.answerOf(row, v, retypedFrom, w)
	switch v.kind {
	case VerdictPinned:
		// The refusal names no row: a narrowed token learns only that it was refused.
		return nil, 0, pinnedConflict("a pinned memory of the namespace states this fact")
	case VerdictMerge:
		ans.MergedInto = judgedOf(v.target)
		return ans, 0, nil
	}
	rows := s.verdictRows(w, row, head, v, ans)
	// Phase 13: the same key in another session of the same subject.
	if !restatement && pol.config.ConflictPolicy != PolicyAppendOnly && row.Status != memrow.StatusProposed {
		for _, o := range sameKeyHeads(st.keyHeads, w.id, now) {
			if pol.config.ConflictPolicy == PolicyNewestWins && !o.Locked {
				rows = append(rows, supersede(o, row, w.op))
				ans.Superseded = append(ans.Superseded, o.MemoryID)
			} else {
				row.JudgementOwed = true
			}
		}
		// The same-key heads were read after the verdict: a key the verdict read too
		// is committed over the head read last, once.
		rows = uniqueRows(rows)
	}
	// Phase 12: commit, the write's row and its verdict's copies together. A dry
	// run (phase 11) runs the same gap check without a commit, and writes nothing.
	plan := &commitPlan{org: w.id.Org, namespace: w.id.Namespace, rows: rows, requestID: w.requestID,
		policyGeneration: pol.generation, gapFrom: gapFrom, idem: w.hold}
	if w.embedded && !restatement && pol.config.ConflictPolicy != PolicyAppendOnly {
		plan.gapCheck = s.gapCheck(q, w.sha, v.peersJudged(), threshold)
	}
	if w.req.DryRun {
		err = s.dryGap(ctx, plan)
	} else {
		s.faults.beforeCommit()
		err = s.commit(ctx, plan)
	}
	var gap *errGap
	switch {
	case errors.As(err, &gap):
		measured, err := s.measureGap(ctx, q, gap)
		if errors.Is(err, embed.ErrEmbedderUnavailable) {
			return nil, 0, httperr.Unavailable(httperr.CodeEmbedderDown, "the embedder is unavailable; retry", err)
		}
		if err != nil {
			return nil, 0, httperr.Store("measuring the admission gap", err)
		}
		w.absorbed = mergePeers(w.absorbed, measured)
		return nil, gap.upTo, nil
	case errors.Is(err, errHeadMoved), errors.Is(err, errPolicyMoved):
		return nil, gapFrom, nil
	case errors.Is(err, errGapTooLarge):
		return nil, 0, httperr.Unavailable(httperr.CodeProjectionBehind,
			"ClickHouse is too far behind the namespace to judge this write against its peers; retry", err)
	case err != nil:
		return nil, 0, commitError(err)
	}
	if !w.req.DryRun {
		if err := s.faults.afterCommit(); err != nil {
			return nil, 0, err
		}
	}
	if w.req.DryRun {
		ans.DryRun, ans.Version, ans.VersionText, ans.Seq = true, 0, "0", 0
		return ans, 0, nil
	}
	if w.embedded {
		s.vectors.Add(vectorKey(row.Org, row.Namespace, row.Seq), w.vector)
	}
	ans.Written, ans.Event = true, string(rows[0].event)
	ans.Version, ans.VersionText, ans.Seq = row.Version, memrow.VersionText(row.Version), row.Seq
	ans.MemoryID = row.MemoryID
	return ans, 0, nil
}

// buildSetRow builds the version row over the head read in this round: a revision
// carries the head's other columns forward and resets those that described its value.
func (s *Service) buildSetRow(w *setWrite, head *memrow.Row, now time.Time, memoryType, sensitivity string, exp expiry, cfg *NamespaceConfig) *memrow.Row {
	req := w.req
	row := &memrow.Row{
		Identity:      w.id,
		MemoryID:      uuid.NewString(),
		MemoryType:    memoryType,
		Status:        memrow.StatusActive,
		Value:         w.value,
		ContentSHA256: w.sha,
		Tags:          []string{},
		Entities:      []string{},
		Confidence:    1,
		Actor:         w.p.Actor(),
		SourceClass:   SourceDirect,
		Sensitivity:   sensitivity,
		ValidAt:       req.ValidAt,
		ValidTo:       req.ValidTo,
		ExpiresAt:     exp.at,
		OnExpire:      exp.onExpire,
		Pinned:        req.Pin,
	}
	if head != nil {
		row.MemoryID, row.CreatedAt = head.MemoryID, head.CreatedAt
		if head.Live(now) {
			row.Tags, row.Confidence = head.Tags, head.Confidence
			row.Pinned = head.Pinned || req.Pin
			row.Locked = head.Locked
		}
	}
	if req.Tags != nil {
		row.Tags = req.Tags
	}
	if req.Confidence != nil {
		row.Confidence = *req.Confidence
	}
	if req.SourceClass != "" && req.SourceClass != SourceDirect {
		row.SourceClass = req.SourceClass
	}
	if req.Proposed {
		row.Status = memrow.StatusProposed
	}
	w.setGraph(row, head, now, cfg)
	return row
}

// changesGraph reports whether the request declares entities or relations other than
// the head's.
func (w *setWrite) changesGraph(head *memrow.Row, cfg *NamespaceConfig) bool {
	if w.req.Entities != nil && (!slices.Equal(w.entities, head.Entities) || !maps.Equal(w.entityTypes, head.EntityTypes)) {
		return true
	}
	if w.req.Relations == nil {
		return false
	}
	a, _ := json.Marshal(memrow.Relations(w.req.Relations, cfg.cardinality))
	b, _ := json.Marshal(head.Relations)
	return string(a) != string(b)
}

// setGraph fixes what the row declares for the graph. Entities and relations the
// request names replace the head's, each relation stamped with its predicate's
// cardinality as the namespace declares it now; left out, they describe the head's
// value, so they stay only while the value does (or always, for memory.update).
func (w *setWrite) setGraph(row, head *memrow.Row, now time.Time, cfg *NamespaceConfig) {
	keep := head != nil && head.Live(now) && (w.keepGraph || head.ContentSHA256 == row.ContentSHA256)
	switch {
	case w.req.Entities != nil:
		row.Entities, row.EntityTypes = w.entities, w.entityTypes
	case keep:
		row.Entities, row.EntityTypes = head.Entities, head.EntityTypes
	}
	if row.Entities == nil {
		row.Entities = []string{}
	}
	switch {
	case w.req.Relations != nil:
		row.Relations = memrow.Relations(w.req.Relations, cfg.cardinality)
	case keep:
		row.Relations = head.Relations
	}
}

// verdictRows turns a verdict into the rows to commit: the write's own row, marked as
// the verdict says, then a copy of every peer it changes, each over the head it read.
// A locked peer is left as it is.
func (s *Service) verdictRows(w *setWrite, row, head *memrow.Row, v verdict, ans *setAnswer) []*pending {
	var readVersion int64
	event := events.TypeWritten
	if head != nil {
		readVersion = head.Version
		if head.Live(s.now()) {
			event = events.TypeRevised
		}
	}
	own := &pending{own: true, op: w.op, event: event, row: row, readVersion: readVersion}
	if w.embedded {
		own.vector, own.keyVector, own.chunkVectors = w.vector, w.keyVector, w.chunkVectors
	}
	rows := []*pending{own}
	// A proposal stays a proposal whatever its verdict: the verdict links it, and an
	// owner's decision makes it a fact.
	proposed := row.Status == memrow.StatusProposed
	switch v.kind {
	case VerdictDuplicate:
		row.DuplicateOf = v.target.MemoryID
		if !proposed {
			row.Status = memrow.StatusDuplicate
		}
		ans.DuplicateOf = v.target.MemoryID
	case VerdictRefines:
		if proposed {
			w.advise("proposal: a proposal retires nothing until it is accepted")
			break
		}
		if v.target.Locked {
			w.advise("peer_locked: the peer this write refines is locked and stays as it is")
			break
		}
		rows = append(rows, supersede(v.target, row, w.op))
		ans.Superseded = append(ans.Superseded, v.target.MemoryID)
	case VerdictConflict:
		if !proposed {
			row.Status = memrow.StatusConflicted
		}
		for _, peer := range v.conflicts {
			row.ConflictWith = appendOnce(row.ConflictWith, peer.MemoryID)
			ans.ConflictWith = append(ans.ConflictWith, peer.MemoryID)
			if proposed {
				continue // a proposal flags no established fact
			}
			if peer.Locked {
				w.advise("peer_locked: a conflicting peer is locked and is not marked")
				continue
			}
			mark := copyOf(peer)
			mark.Status = memrow.StatusConflicted
			mark.ConflictWith = appendOnce(append([]string(nil), peer.ConflictWith...), row.MemoryID)
			rows = append(rows, &pending{op: w.op, event: events.TypeStatusChanged, row: mark, readVersion: peer.Version})
		}
	}
	ans.Status = row.Status
	return rows
}

// uniqueRows keeps one row per key, the last built: a commit writes each head once.
func uniqueRows(rows []*pending) []*pending {
	last := map[string]int{}
	for i, p := range rows {
		last[heads.IdentityKey(p.row.Identity)] = i
	}
	out := rows[:0:0]
	for i, p := range rows {
		if last[heads.IdentityKey(p.row.Identity)] == i {
			out = append(out, p)
		}
	}
	return out
}

// supersede is the copy that retires a row behind the one that replaces it.
func supersede(old, by *memrow.Row, op string) *pending {
	c := copyOf(old)
	c.Status, c.SupersededBy = memrow.StatusSuperseded, by.MemoryID
	return &pending{op: op, event: events.TypeStatusChanged, row: c, readVersion: old.Version}
}

// copyOf is a new version of a head with its content unchanged: a copy writer's row.
// A copy keeps the head's text, so it has no search document of its own to add; its
// status change reaches the search documents through the projection of its revision.
func copyOf(h *memrow.Row) *memrow.Row {
	c := *h
	c.Tags = append([]string(nil), h.Tags...)
	c.ConflictWith = append([]string(nil), h.ConflictWith...)
	c.Entities = slices.Clone(h.Entities)
	c.EntityTypes = maps.Clone(h.EntityTypes)
	c.Relations = slices.Clone(h.Relations)
	return &c
}

func appendOnce(list []string, v string) []string {
	for _, x := range list {
		if x == v {
			return list
		}
	}
	return append(list, v)
}

// embedSet embeds, in one call, the value, the key's words (when it has some) and a
// long value's chunks.
func (s *Service) embedSet(ctx context.Context, w *setWrite) error {
	texts, split := embedTexts(w)
	vs, err := s.embedder.Embed(ctx, texts)
	if err != nil {
		if errors.Is(err, embed.ErrEmbedderUnavailable) {
			return httperr.Unavailable(httperr.CodeEmbedderDown, "the embedder is unavailable; retry", err)
		}
		return httperr.Store("embedding the value", err)
	}
	split(vs)
	return nil
}

// embedTexts lists a write's texts to embed and returns the function that hands the
// vectors back to it.
func embedTexts(w *setWrite) ([]string, func([][]float32)) {
	texts := []string{w.valueText}
	keyWords := memrow.KeyWords(w.id.MemoryKey)
	if keyWords != "" {
		texts = append(texts, keyWords)
	}
	chunks := text.Chunks(w.valueText)
	texts = append(texts, chunks...)
	return texts, func(vs [][]float32) {
		w.vector, vs = vs[0], vs[1:]
		if keyWords != "" {
			w.keyVector, vs = vs[0], vs[1:]
		}
		w.chunkVectors = vs[:len(chunks)]
	}
}

// threshold resolves the conflict threshold: the type's dedup_threshold, else the
// namespace's conflict_threshold, else LOOM_CONFLICT_THRESHOLD.
func (s *Service) threshold(ns NamespaceConfig, t TypeConfig) float64 {
	switch {
	case t.DedupThreshold != nil:
		return *t.DedupThreshold
	case ns.ConflictThreshold != nil:
		return *ns.ConflictThreshold
	}
	return s.cfg.ConflictThreshold
}

// keyHoldsFact reports whether any identity's head of the key holds an established
// fact: a proposal must not retire anyone's fact, whatever the token's read scope.
func keyHoldsFact(keyHeads []*memrow.Row, now time.Time) bool {
	for _, h := range keyHeads {
		if h.Established(now) {
			return true
		}
	}
	return false
}

// sameKeyHeads are the live established heads of the key in other sessions of the
// same subject: the same user, or for the anonymous user the same agent.
func sameKeyHeads(keyHeads []*memrow.Row, id memrow.Identity, now time.Time) []*memrow.Row {
	var out []*memrow.Row
	for _, h := range keyHeads {
		if h.Identity == id || h.UserID != id.UserID || h.SessionID == id.SessionID || !h.Established(now) {
			continue
		}
		if id.UserID == memrow.DefaultIdentity && h.Agent != id.Agent {
			continue
		}
		out = append(out, h)
	}
	return out
}

// roundState is what a round of memory.set reads of Postgres before its verdict.
type roundState struct {
	policy    *policy
	head      *memrow.Row   // the write's own key's head, nil when none
	keyHeads  []*memrow.Row // the key's heads under every identity
	watermark int64         // the capture: every revision at or below it is in ClickHouse
}

func (s *Service) readRound(ctx context.Context, id memrow.Identity) (*roundState, error) {
	st := &roundState{}
	b := &pgx.Batch{}
	finish := queuePolicy(b, id.Org, id.Namespace)
	queueHeads(b, &st.keyHeads, `SELECT row FROM loom.memory_current WHERE org = $1 AND namespace = $2 AND memory_key = $3`,
		id.Org, id.Namespace, id.MemoryKey)
	s.queueWatermark(b, id.Org, id.Namespace, &st.watermark)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	var err error
	if st.policy, err = finish(); err != nil {
		return nil, err
	}
	for _, r := range st.keyHeads {
		if r.Identity == id {
			st.head = r
		}
	}
	return st, nil
}

func (s *Service) answerOf(row *memrow.Row, v verdict, retypedFrom string, w *setWrite) *setAnswer {
	return &setAnswer{
		MemoryID: row.MemoryID, Namespace: row.Namespace, MemoryKey: row.MemoryKey,
		Agent: row.Agent, UserID: row.UserID, SessionID: row.SessionID,
		ContentSHA256: row.ContentSHA256, ReinforcementCount: row.ReinforcementCount,
		VersionText: "0", Verdict: v.kind, Status: row.Status, MemoryType: row.MemoryType, RetypedFrom: retypedFrom,
		Sensitivity: row.Sensitivity, Pinned: row.Pinned, ExpiresAt: row.ExpiresAt, OnExpire: row.OnExpire,
		Peers: nonNilJudged(v.judged), Advisories: w.advisories,
	}
}

func (w *setWrite) advise(a string) { w.advisories = append(w.advisories, a) }

func (a *setAnswer) committed() bool { return a.Written }

func (a *setAnswer) outcome() string {
	switch {
	case a.DryRun:
		return "dry_run"
	case !a.Written:
		return a.Verdict
	}
	return "ok"
}

func (v verdict) peersJudged() []peer {
	var out []peer
	for _, r := range v.conflicts {
		out = append(out, peer{row: r})
	}
	if v.target != nil {
		out = append(out, peer{row: v.target})
	}
	return out
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

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

func decodeSet(body []byte) (*setRequest, error) {
	var req setRequest
	if err := httperr.DecodeBody(body, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

func validateIdentity(id memrow.Identity) error {
	if err := memrow.ValidateKey(id.MemoryKey); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"agent", id.Agent}, {"user_id", id.UserID}, {"session_id", id.SessionID}} {
		if err := memrow.ValidateIdentity(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return memrow.DefaultIdentity
	}
	return s
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
