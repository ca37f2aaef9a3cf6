package command

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// Stage 2, admit (set.go lists the stages). The admission rules decide one write
// against what a round read: its head, its key's heads under every identity and the
// namespace's policy. memory.set, memory.update, memory.update_by_id and
// memory.bulk_set all run them; they read no store (the round reads, set_1_round.go,
// and the commit writes, set_6_commit.go). They run in memory.set's order (schemas/openapi.yaml):
// type, guards, value, expiry, proposals and preconditions, the row; the verdict
// (set_3_judge.go) and the rows it writes (set_4_rows.go) follow. The first refusal
// answers.

// admissionRules is what a round's entries are admitted under: the namespace's
// policy as the round read it, and the server's limits.
type admissionRules struct {
	policy             *policy
	charLimit          int // LOOM_MEMORY_CHAR_LIMIT, unless the type sets its own
	sensitiveRetention time.Duration
	conflictThreshold  float64 // the embedder calibration, else LOOM_CONFLICT_THRESHOLD
	duplicateThreshold float64
	// judgementFloor marks a write with a peer at it for the conflict resolver (0: the
	// resolver is off).
	judgementFloor float64
}

// rulesOf is a round's rules: the policy it read, and the embedder calibration of the
// thresholds when the namespace has one (conflict_calibration.go), which stands in for
// LOOM_CONFLICT_THRESHOLD and LOOM_DUPLICATE_THRESHOLD.
func (s *Service) rulesOf(st *roundState) admissionRules {
	r := admissionRules{policy: st.policy, charLimit: s.cfg.CharLimit, sensitiveRetention: s.cfg.SensitiveRetention,
		conflictThreshold: s.cfg.ConflictThreshold, duplicateThreshold: s.cfg.DuplicateThreshold, judgementFloor: s.judgementFloor()}
	if st.judging.ok {
		r.conflictThreshold, r.duplicateThreshold = st.judging.conflict, st.judging.duplicate
	}
	return r
}

func (r admissionRules) conflictPolicy() string { return r.policy.config.ConflictPolicy }

// threshold resolves the conflict threshold: the type's dedup_threshold, else the
// namespace's conflict_threshold, else the embedder calibration (rulesOf), else
// LOOM_CONFLICT_THRESHOLD.
func (r admissionRules) threshold(t TypeConfig) float64 {
	switch {
	case t.DedupThreshold != nil:
		return *t.DedupThreshold
	case r.policy.config.ConflictThreshold != nil:
		return *r.policy.config.ConflictThreshold
	}
	return r.conflictThreshold
}

// entry is one write on its way through a round: the request, what the round read
// for it, and what the rules made of it.
type entry struct {
	w        *setWrite
	index    int           // its place in a batch
	replaced bool          // a later entry of the batch writes the same identity and key
	noRetire bool          // no verdict retires a live memory on its behalf (memory.import)
	head     *memrow.Row   // its key's head under its identity; nil when none
	keyHeads []*memrow.Row // its key's heads under every identity
	draft
	v          verdict
	superseded []string // the heads its row retires
	// listed is the policy it was judged under (judge): its allowlisted pairs, which
	// markSameKey leaves alone as the verdict does.
	listed *policy
}

// draft is an entry the rules admitted: the row it would commit, built over its head.
type draft struct {
	row         *memrow.Row
	retypedFrom string
	// restatement: the key's live value again (or an update that leaves the value as
	// it is), reinforced or kept, and not judged against peers.
	restatement bool
	threshold   float64
	advisories  []string
}

func (e *entry) advise(a string) { e.advisories = append(e.advisories, a) }

// headOf is the head among a key's heads held under id, nil when none.
func headOf(keyHeads []*memrow.Row, id memrow.Identity) *memrow.Row {
	var head *memrow.Row
	for _, h := range keyHeads {
		if h.Identity == id {
			head = h
		}
	}
	return head
}

// overHead fits an update to the head a round read: it needs a live head (404), and
// one that sends no value keeps the head's.
func (w *setWrite) overHead(head *memrow.Row, now time.Time) error {
	if w.requireHead && (head == nil || !head.Live(now)) {
		return httperr.NotFound("memory not found")
	}
	if w.requireProposal && (head == nil || !head.Live(now) || head.Status != memrow.StatusProposed) {
		return notAProposal()
	}
	if w.valueFromHead && (w.value == nil || w.sha != head.ContentSHA256) {
		w.setValue(head.Value)
	}
	return nil
}

// refusal is why the rules write nothing for an entry. memory.set returns it as its
// error, which the edge answers with envelope; memory.bulk_set lists the entry under
// the skip it names.
type refusal struct {
	kind   refusalKind
	action string // refusedLocked: what the lock refused (write, expire)
	cause  error  // refusedCharLimit: the error naming the counts
}

type refusalKind int

const (
	refusedLocked       refusalKind = iota + 1 // a locked head's value or expiry
	refusedPinned                              // a pinned head's value, without pin: true
	refusedPinnedPeer                          // a close pinned peer states the fact
	refusedCharLimit                           // the value is over the type's char limit
	refusedBlacklisted                         // the value matches a blacklist pattern
	refusedUnchanged                           // memory.bulk_set: the entry repeats the head
	refusedKeyHoldsFact                        // a proposal over an established fact
	refusedPrecondition                        // if_match_sha256 is not the live value's
)

var refusalNames = map[refusalKind]string{refusedLocked: "locked", refusedPinned: "pinned", refusedPinnedPeer: "pinned peer",
	refusedCharLimit: "char limit", refusedBlacklisted: "blacklisted", refusedUnchanged: "unchanged",
	refusedKeyHoldsFact: "key holds a fact", refusedPrecondition: "precondition failed"}

func (r *refusal) Error() string {
	if r.action != "" {
		return "admission refused the write: " + refusalNames[r.kind] + " (" + r.action + ")"
	}
	return "admission refused the write: " + refusalNames[r.kind]
}

// envelope is the refusal as memory.set answers it.
func (r *refusal) envelope() error {
	switch r.kind {
	case refusedLocked:
		return locked(r.action)
	case refusedPinned:
		return pinnedConflict("the key holds a pinned value; write with pin=true to replace it")
	case refusedPinnedPeer:
		// The refusal names no row: a narrowed token learns only that it was refused.
		return pinnedConflict("a pinned memory of the namespace states this fact")
	case refusedCharLimit:
		return r.cause
	case refusedBlacklisted:
		return httperr.New(http.StatusUnprocessableEntity, CodeBlacklisted, "the value matches a blacklisted pattern of the namespace").With("field", "value")
	case refusedKeyHoldsFact:
		return httperr.New(http.StatusConflict, CodeKeyHoldsFact, "a proposal may not replace the key's established fact")
	case refusedPrecondition:
		return httperr.New(http.StatusConflict, CodePreconditionFailed, "if_match_sha256 does not match the live value")
	}
	return fmt.Errorf("admission: refusal %d has no answer of memory.set's", r.kind)
}

// admit runs the rules before the verdict over an entry and its head, and builds the
// row it would commit.
func admit(e *entry, now time.Time, r admissionRules) (draft, *refusal) {
	w, head, cfg := e.w, e.head, &r.policy.config
	live := head != nil && head.Live(now)
	memoryType, retypedFrom := resolveType(w.req.MemoryType, head, live, cfg)
	typeCfg := cfg.typeConfig(memoryType)
	if ref := guardHead(w, head, live); ref != nil {
		return draft{}, ref
	}
	if ref := checkValue(w, typeCfg, r); ref != nil {
		return draft{}, ref
	}
	sensitivity, advisories := sensitivityOf(w)
	exp := resolveExpiry(expiryInput{now: now, ttlSeconds: w.req.TTLSeconds, validTo: w.req.ValidTo, typeConfig: typeCfg,
		namespace: *cfg, high: sensitivity == memrow.SensitivityHigh, sensitiveRetention: r.sensitiveRetention})
	if w.skipUnchanged && live && repeatsHead(w, head, sensitivity, cfg) {
		return draft{}, &refusal{kind: refusedUnchanged}
	}
	if live && head.Locked {
		// A locked row keeps its expiry: a retention window does not move it, and a
		// write that asks to move it is refused.
		if (w.req.TTLSeconds != nil || w.req.ValidTo != nil) && !sameTime(exp.at, head.ExpiresAt) {
			return draft{}, &refusal{kind: refusedLocked, action: "expire"}
		}
		exp = expiry{at: head.ExpiresAt, onExpire: head.OnExpire}
	}
	if ref := checkPreconditions(w, head, live, e.keyHeads, now); ref != nil {
		return draft{}, ref
	}
	row := buildSetRow(w, head, now, memoryType, sensitivity, exp, cfg)
	return draft{row: row, retypedFrom: retypedFrom, restatement: reviseHead(row, w, head, live, now),
		threshold: r.threshold(typeCfg), advisories: advisories}, nil
}

// resolveType is the entry's type: the one it asks for, else the live head's, else
// fact; then the namespace's retype of it.
func resolveType(requested string, head *memrow.Row, live bool, cfg *NamespaceConfig) (memoryType, retypedFrom string) {
	memoryType = requested
	if memoryType == "" {
		memoryType = memrow.DefaultMemoryType
		if live {
			memoryType = head.MemoryType
		}
	}
	if to := cfg.typeConfig(memoryType).Retype; to != "" {
		return to, memoryType
	}
	return memoryType, ""
}

// guardHead refuses a new value over a live head that is locked, then one that is
// pinned unless the entry pins too. The same bytes again are no change of value.
func guardHead(w *setWrite, head *memrow.Row, live bool) *refusal {
	if !live || head.ContentSHA256 == w.sha {
		return nil
	}
	if head.Locked {
		return &refusal{kind: refusedLocked, action: "write"}
	}
	if head.Pinned && !w.req.Pin {
		return &refusal{kind: refusedPinned}
	}
	return nil
}

// checkValue holds the value to the char limit and the blacklist.
func checkValue(w *setWrite, t TypeConfig, r admissionRules) *refusal {
	limit := r.charLimit
	if t.CharLimit > 0 {
		limit = t.CharLimit
	}
	if err := memrow.CheckCharLimit(w.value, limit); err != nil {
		return &refusal{kind: refusedCharLimit, cause: err}
	}
	if _, hit := r.policy.blacklisted(w.valueText); hit {
		return &refusal{kind: refusedBlacklisted}
	}
	return nil
}

// sensitivityOf is the row's tier: high when the detector found anything or the
// request asks for it. A request may raise the tier, not lower it.
func sensitivityOf(w *setWrite) (memrow.Sensitivity, []string) {
	sensitivity := memrow.SensitivityNormal
	if len(w.detected) > 0 || w.req.Sensitivity == memrow.SensitivityHigh {
		sensitivity = memrow.SensitivityHigh
	}
	if len(w.detected) > 0 && w.req.Sensitivity == memrow.SensitivityNormal {
		return sensitivity, []string{"sensitivity_kept: the detector found " + w.detected[0] + "; a request may raise the tier, not lower it"}
	}
	return sensitivity, nil
}

// repeatsHead reports whether a batch entry repeats the stored row: the same bytes,
// and no change of sensitivity, pin, ttl, entities or relations. A replayed batch must
// not revive a retired row over the write that retired it.
func repeatsHead(w *setWrite, head *memrow.Row, sensitivity memrow.Sensitivity, cfg *NamespaceConfig) bool {
	return head.ContentSHA256 == w.sha && sensitivity == head.Sensitivity && (!w.req.Pin || head.Pinned) &&
		w.req.TTLSeconds == nil && !w.changesGraph(head, cfg)
}

// checkPreconditions refuses a proposal while any identity's head of the key holds an
// established fact (whatever the token's read scope: a proposal must not retire
// anyone's fact), and a write whose if_match_sha256 is not the live value's.
func checkPreconditions(w *setWrite, head *memrow.Row, live bool, keyHeads []*memrow.Row, now time.Time) *refusal {
	if w.req.Proposed && slices.ContainsFunc(keyHeads, func(h *memrow.Row) bool { return h.Established(now) }) {
		return &refusal{kind: refusedKeyHoldsFact}
	}
	if w.req.IfMatchSHA256 != "" && (!live || head.ContentSHA256 != w.req.IfMatchSHA256) {
		return &refusal{kind: refusedPrecondition}
	}
	return nil
}

// reviseHead fits the row to the head it revises and reports whether it is a
// restatement. The same bytes over the live established value are one: reinforced,
// keeping the head's status and conflict links. An update that leaves the value as it
// is changes metadata only: the row keeps the head's status, links and reinforcement.
// An update of a proposal revises it; it does not accept it.
func reviseHead(row *memrow.Row, w *setWrite, head *memrow.Row, live bool, now time.Time) bool {
	switch {
	case w.requireHead && live && head.ContentSHA256 == w.sha:
		row.ReinforcementCount, row.Status, row.ConflictWith = head.ReinforcementCount, head.Status, head.ConflictWith
		row.DuplicateOf, row.SupersededBy, row.JudgementOwed = head.DuplicateOf, head.SupersededBy, head.JudgementOwed
		return true
	case live && head.Established(now) && head.ContentSHA256 == w.sha:
		row.ReinforcementCount = head.ReinforcementCount + 1
		row.Status, row.ConflictWith = head.Status, head.ConflictWith
		return true
	case w.requireHead && live && head.Status == memrow.StatusProposed:
		row.Status = memrow.StatusProposed
	}
	return false
}

// buildSetRow builds the version row over the head read in this round: a revision
// carries the head's other columns forward and resets those that described its value.
// Provenance is the server's: the token is the actor, and a request may only downgrade
// the source class.
func buildSetRow(w *setWrite, head *memrow.Row, now time.Time, memoryType string, sensitivity memrow.Sensitivity, exp expiry, cfg *NamespaceConfig) *memrow.Row {
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
		// The memory's recall count is the memory's, whatever version search served.
		row.MemoryID, row.CreatedAt, row.RecallCount, row.EvidenceCount = head.MemoryID, head.CreatedAt, head.RecallCount, head.EvidenceCount
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
	case keep && head.ContentSHA256 != row.ContentSHA256:
		// Over a new value, a fact stated for the old one holds only while the new
		// value restates it (restatement.go).
		row.Relations = restated(head.Relations, memrow.ValueText(head.Value), memrow.ValueText(row.Value))
	case keep:
		row.Relations = head.Relations
	}
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}
