package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/evidence"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/idempotency"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/route"
)

// MaxBulkEntries is the most entries one memory.bulk_set takes.
const MaxBulkEntries = 1000

// bulkEntry is one entry of memory.bulk_set: memory.set's body plus its key.
type bulkEntry struct {
	setRequest
	Key string `json:"key"`
}

type bulkRequest struct {
	Entries []json.RawMessage `json:"entries"`
	DryRun  bool              `json:"dry_run"`
}

// bulkResult is what happened to one entry.
type bulkResult struct {
	Index       int           `json:"index"`
	MemoryKey   string        `json:"memory_key"`
	MemoryID    string        `json:"memory_id,omitempty"`
	Version     int64         `json:"version,omitempty"`
	VersionText string        `json:"version_text,omitempty"`
	Seq         int64         `json:"seq,omitempty"`
	Verdict     Verdict       `json:"verdict"`
	Status      memrow.Status `json:"status,omitempty"`
	MergedInto  string        `json:"merged_into,omitempty"`
}

func (a *bulkAnswer) committed() bool { return len(a.Written) > 0 && !a.DryRun }

func (a *bulkAnswer) outcome() string {
	switch {
	case a.DryRun:
		return "dry_run"
	case len(a.Written) == 0:
		return "nothing_written"
	}
	return "ok"
}

type bulkAnswer struct {
	Written          []bulkResult `json:"written"`
	Merged           []bulkResult `json:"merged"`
	SkippedPinned    []int        `json:"skipped_pinned"`
	SkippedLocked    []int        `json:"skipped_locked"`
	SkippedUnchanged []int        `json:"skipped_unchanged"`
	Blacklisted      []int        `json:"blacklisted"`
	Replaced         []int        `json:"replaced_in_batch"`
	Superseded       []string     `json:"superseded"`
	DryRun           bool         `json:"dry_run,omitempty"`
}

// bulkWrite is one memory.bulk_set across its admission rounds.
type bulkWrite struct {
	org, namespace string
	entries        []*entry // in batch order, the replaced ones included
	requestID      string
	hold           *idempotency.Hold
	dryRun         bool
	absorbed       []peer // gap rows measured in earlier rounds, with their vectors
	ans            *bulkAnswer
	p              auth.Principal
	bulkOptions
	retired []retirement // what the last round made of opts.retire
}

// bulkOptions are what the writers that go through memory.bulk_set's path
// (memory.set_from_messages, memory.import) add to it.
type bulkOptions struct {
	op string // the revisions' op; "" = memory.bulk_set
	// retire are heads the same commit tombstones (a transcript's "forget this").
	retire []memrow.Identity
	// inCommit runs in the commit's transaction, after the rows are written: an error
	// rolls the whole batch back (a deferred request no longer its worker's).
	inCommit func(ctx context.Context, tx pgx.Tx) error
	// inWritten runs in the commit's transaction after inCommit, with what the commit
	// writes (the entries written, their versions stamped) and merges: the evidence the
	// facts are drawn from commits with them.
	inWritten func(ctx context.Context, tx pgx.Tx, written, merged []bulkResult) error
	// turns, when set, is the transcript the facts are drawn from: the commit keeps it
	// (its turns, chunks, record and belief sources) in the rows' own round trips.
	turns *factTurns
	// checkAll judges every entry against the namespace's peers, whatever
	// LOOM_BULK_CONFLICT_CHECK_MAX_ENTRIES says.
	checkAll bool
	// noRetire: no verdict retires a live memory on the batch's behalf (a refinement
	// and the key's rows in other sessions are flagged for judgement instead).
	noRetire bool
	// noteCounts adds the writer's own counts to the batch's audit row (batchNote).
	noteCounts func(written []*entry) map[string]int
}

// retirement is what a batch did with one head it was asked to retire.
type retirement struct {
	id       memrow.Identity
	memoryID string
	retired  bool
	skipped  string // why not: "missing" (no live head), "locked", "written" (the batch writes the key)
}

func (o bulkOptions) opName() string {
	if o.op == "" {
		return "memory.bulk_set"
	}
	return o.op
}

// bulkCall is a memory.bulk_set of the route's namespace.
type bulkCall struct {
	origin
	namespace string
	body      bulkRequest
}

// bulkSet is memory.bulk_set, the batch form of the point write: one read of the
// heads, hash-based duplicate detection, one embedding call, the verdicts of memory.set
// (for the first LOOM_BULK_CONFLICT_CHECK_MAX_ENTRIES embedded entries against the
// namespace, and every entry against the batch's earlier entries), and one commit. The
// last entry of a key wins inside a batch. A blacklisted, pinned, locked or unchanged
// entry is skipped, not raised.
func (s *Service) bulkSet(ctx context.Context, p auth.Principal, r bulkCall) (*bulkAnswer, error) {
	if len(r.body.Entries) == 0 || len(r.body.Entries) > MaxBulkEntries {
		return nil, httperr.Validation("entries", fmt.Sprintf("entries must hold 1 to %d entries", MaxBulkEntries))
	}
	b, err := s.runBulk(ctx, p, r, bulkOptions{})
	if b == nil {
		return nil, err
	}
	return b.ans, err
}

// runBulk runs a batch through memory.bulk_set's admission rounds and commit, with
// what opts adds, and returns the batch as its last round left it. A batch may hold no
// entry when it only retires.
func (s *Service) runBulk(ctx context.Context, p auth.Principal, r bulkCall, opts bulkOptions) (*bulkWrite, error) {
	b := &bulkWrite{p: p, org: p.Org, namespace: r.namespace, requestID: r.requestID, hold: r.hold, dryRun: r.body.DryRun, bulkOptions: opts,
		ans: &bulkAnswer{Written: []bulkResult{}, Merged: []bulkResult{}, SkippedPinned: []int{}, SkippedLocked: []int{},
			SkippedUnchanged: []int{}, Blacklisted: []int{}, Replaced: []int{}, Superseded: []string{}, DryRun: r.body.DryRun}}
	last := map[memrow.Identity]int{}
	for i, raw := range r.body.Entries {
		w, err := parseEntry(p, r.namespace, i, raw, r.requestID, opts.opName())
		if err != nil {
			return nil, err
		}
		if prev, dup := last[w.id]; dup {
			b.ans.Replaced = append(b.ans.Replaced, b.entries[prev].index)
			b.entries[prev].replaced = true
		}
		last[w.id] = len(b.entries)
		b.entries = append(b.entries, &entry{index: i, w: w, noRetire: opts.noRetire})
	}
	err := s.admitRounds(func(gapFrom int64) (bool, int64, error) { return s.bulkRound(ctx, b, gapFrom) })
	return b, err
}

// parseEntry checks entry i of a batch, naming it in every refusal.
func parseEntry(p auth.Principal, ns string, i int, raw json.RawMessage, requestID, op string) (*setWrite, error) {
	var e bulkEntry
	if err := httperr.DecodeBody(raw, &e); err != nil {
		return nil, entryError(i, err)
	}
	if len(e.Value) == 0 {
		return nil, httperr.Validation(fmt.Sprintf("entries[%d].value", i), "value is required")
	}
	if e.Proposed || e.IfMatchSHA256 != "" || e.DryRun {
		return nil, httperr.Validation(fmt.Sprintf("entries[%d]", i), "proposed, if_match_sha256 and dry_run are memory.set's; a batch entry takes neither")
	}
	id, other, err := route.WriteIdentity(p, ns, e.Key, e.names())
	if err != nil {
		return nil, entryError(i, err)
	}
	if other {
		return nil, otherUser()
	}
	req := e.setRequest
	w, err := newSetWrite(op, p, id, &req, requestID)
	if err != nil {
		return nil, entryError(i, err)
	}
	w.skipUnchanged = true
	return w, nil
}

func entryError(i int, err error) error {
	var fe *memrow.FieldError
	if errors.As(err, &fe) {
		return &memrow.FieldError{Field: fmt.Sprintf("entries[%d].%s", i, fe.Field), Code: fe.Code, Message: fe.Message}
	}
	var he *httperr.Error
	if errors.As(err, &he) && he.Field != "" {
		c := *he
		c.Field = fmt.Sprintf("entries[%d].%s", i, he.Field)
		return &c
	}
	return err
}

// bulkRound reads the policy and every entry's heads as they are now, runs the
// admission rules over the entries in batch order and commits the batch. It returns
// done once the answer is filled, else the seq the next round's gap check starts after.
func (s *Service) bulkRound(ctx context.Context, b *bulkWrite, gapFrom int64) (bool, int64, error) {
	now := s.now()
	// The same-value heads are looked up in the entries' users' scopes and in the
	// rows of no user: a head keeps its content hash keyed under its scope's key
	// (migration 101). Another user's head holding the value (a peer of a token bound
	// to no user, or a pinned one) is found by the peer search, not by its hash.
	var keys, shas []string
	users := []string{""}
	for _, e := range b.entries {
		keys, shas = append(keys, e.w.id.MemoryKey), append(shas, e.w.sha)
		if !slices.Contains(users, e.w.id.UserID) {
			users = append(users, e.w.id.UserID)
		}
	}
	for _, id := range b.retire {
		keys = append(keys, id.MemoryKey)
	}
	st, err := s.readRound(ctx, b.org, b.namespace, keys, users, shas, false)
	if err != nil {
		return false, 0, httperr.Store("reading the batch's heads and policy", err)
	}
	gapFrom = max(gapFrom, st.capture)
	rules := s.rulesOf(st)
	b.ans.SkippedPinned, b.ans.SkippedLocked, b.ans.SkippedUnchanged, b.ans.Blacklisted = []int{}, []int{}, []int{}, []int{}
	var admitted []*entry
	for _, e := range b.entries {
		if e.replaced {
			continue
		}
		e.keyHeads = st.keyHeads[e.w.id.MemoryKey]
		e.head = headOf(e.keyHeads, e.w.id)
		d, ref := admit(e, now, rules)
		if ref != nil {
			if err := b.ans.skip(e.index, ref); err != nil {
				return false, 0, err
			}
			continue
		}
		e.draft = d
		admitted = append(admitted, e)
	}
	if err := s.embedEntries(ctx, admitted, "embedding the batch"); err != nil {
		return false, 0, err
	}
	written, err := s.judgeBatch(ctx, b, admitted, st, rules, now)
	if errors.Is(err, errPeersMoved) {
		return false, gapFrom, nil
	}
	if err != nil {
		return false, 0, err
	}
	rows, superseded := writeRows(b.opName(), written, rules.conflictPolicy(), now)
	rows = append(rows, b.retirements(st, rows, now)...)
	b.ans.Written, b.ans.Superseded = []bulkResult{}, append([]string{}, superseded...) // [] rather than null
	if len(rows) == 0 {
		return true, 0, nil
	}
	plan := &commitPlan{org: b.org, namespace: b.namespace, rows: rows, requestID: b.requestID,
		policyGeneration: st.policy.generation, gapFrom: gapFrom, idem: b.hold, inCommit: b.inCommit, note: b.batchNote(written)}
	if b.inWritten != nil {
		plan.inCommit = func(ctx context.Context, tx pgx.Tx) error {
			if b.inCommit != nil {
				if err := b.inCommit(ctx, tx); err != nil {
					return err
				}
			}
			var stamped bulkAnswer
			stamped.listWritten(written, false)
			return b.inWritten(ctx, tx, stamped.Written, b.ans.Merged)
		}
	}
	if b.turns != nil {
		plan.record = s.turnsRecord(b, written)
	}
	if rules.conflictPolicy() != PolicyAppendOnly {
		plan.gapCheck = s.bulkGapCheck(written)
	}
	retry, next, err := s.commitRound(ctx, plan, b.dryRun, "this batch", func(g *errGap) error {
		measured, err := s.gapVectors(ctx, g.rows, (*memrow.Row).Embedded)
		b.absorbed = mergePeers(b.absorbed, measured)
		return err
	})
	if err != nil || retry {
		return false, next, err
	}
	b.ans.listWritten(written, b.dryRun)
	return true, 0, nil
}

// factTurns is a transcript a batch's commit keeps with the facts drawn from it;
// links names the belief sources, from the turns and what the commit writes and merges.
type factTurns struct {
	batch *turnBatch
	links func(rows []evidence.Turn, written, merged []bulkResult) []evidence.Link
}

// turnsRecord commits the batch's transcript with its rows: the session's next index
// read in the first round trip, the turns, chunks, record and links queued after the
// rows' writes, under the seq after theirs.
func (s *Service) turnsRecord(b *bulkWrite, written []*entry) *planRecord {
	t := b.turns
	var next int
	return &planRecord{
		read: func(bb *pgx.Batch) { t.batch.queueNextIndex(bb, &next) },
		write: func(bb *pgx.Batch, seq int64) error {
			var stamped bulkAnswer
			stamped.listWritten(written, false)
			return s.queueTurns(bb, t.batch, seq, next, func(rows []evidence.Turn) []evidence.Link {
				return t.links(rows, stamped.Written, b.ans.Merged)
			})
		},
	}
}

// retirements are the tombstones of the heads the batch was asked to retire, each over
// the head the round read: a live one not locked and not written by the batch itself.
func (b *bulkWrite) retirements(st *roundState, rows []*pending, now time.Time) []*pending {
	b.retired = nil
	writes := map[string]bool{}
	for _, p := range rows {
		writes[heads.IdentityKey(p.row.Identity)] = true
	}
	var out []*pending
	for _, id := range b.retire {
		r := retirement{id: id}
		head := headOf(st.keyHeads[id.MemoryKey], id)
		switch {
		case head == nil || !head.Live(now):
			r.skipped = "missing"
		case writes[heads.IdentityKey(id)]:
			r.memoryID, r.skipped = head.MemoryID, "written"
		case head.Locked:
			r.memoryID, r.skipped = head.MemoryID, "locked"
		default:
			row := copyOf(head)
			row.Tombstone, row.Actor = true, b.p.Actor()
			r.memoryID, r.retired = head.MemoryID, true
			writes[heads.IdentityKey(id)] = true
			out = append(out, &pending{own: true, op: b.opName(), event: events.TypeTombstoned, row: row, readVersion: head.Version, readSeq: head.Seq})
		}
		b.retired = append(b.retired, r)
	}
	return out
}

// judgeBatch judges the admitted entries in batch order: the first
// LOOM_BULK_CONFLICT_CHECK_MAX_ENTRIES that seek peers against the namespace's rows
// read from the index or ClickHouse, and every one against the rows holding its exact value, the
// batch's earlier written entries and the gap rows measured. It returns the entries
// that write; a merged or pinned one goes on the answer's lists.
func (s *Service) judgeBatch(ctx context.Context, b *bulkWrite, admitted []*entry, st *roundState, r admissionRules, now time.Time) ([]*entry, error) {
	external, err := s.namespacePeers(ctx, admitted, r, b.checkAll, st.fromIndex)
	if err != nil {
		return nil, peerReadError("reading the batch's peers", err)
	}
	b.ans.Merged = []bulkResult{}
	var written, earlier []*entry
	for i, e := range admitted {
		var peers []peer
		if !e.restatement && r.conflictPolicy() != PolicyAppendOnly {
			peers = e.batchPeers(external[i], st.bySHA[e.w.sha], earlier, b.absorbed, now)
		}
		v, ref := judge(e, peers, r)
		e.v = v
		switch {
		case ref != nil:
			if err := b.ans.skip(e.index, ref); err != nil {
				return nil, err
			}
		case v.kind == VerdictMerge:
			b.ans.Merged = append(b.ans.Merged, bulkResult{Index: e.index, MemoryKey: e.w.id.MemoryKey, Verdict: VerdictMerge, MergedInto: v.target.MemoryID})
		default:
			written = append(written, e)
			if e.row.Embedded() {
				earlier = append(earlier, e)
			}
		}
	}
	return written, nil
}

// namespacePeers reads the namespace's peers of the first
// LOOM_BULK_CONFLICT_CHECK_MAX_ENTRIES entries that seek them, a few at a time.
func (s *Service) namespacePeers(ctx context.Context, entries []*entry, r admissionRules, all, fromIndex bool) ([][]peer, error) {
	out := make([][]peer, len(entries))
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	checked := 0
	for i, e := range entries {
		if !e.seeksPeers(r.conflictPolicy()) || (checked >= s.cfg.BulkConflictCheckMax && !all) {
			continue
		}
		checked++
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ps, err := s.readPeers(ctx, e.peerQuery(), fromIndex)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			out[i] = ps
		}()
	}
	wg.Wait()
	return out, firstErr
}

// skip lists an entry the rules refused under its skip. A value over the char limit
// refuses the whole batch, naming the entry.
func (a *bulkAnswer) skip(index int, r *refusal) error {
	switch r.kind {
	case refusedLocked:
		a.SkippedLocked = append(a.SkippedLocked, index)
	case refusedPinned, refusedPinnedPeer:
		a.SkippedPinned = append(a.SkippedPinned, index)
	case refusedBlacklisted:
		a.Blacklisted = append(a.Blacklisted, index)
	case refusedUnchanged:
		a.SkippedUnchanged = append(a.SkippedUnchanged, index)
	default:
		return entryError(index, r.envelope())
	}
	return nil
}

// listWritten lists the committed entries (a dry run's without versions).
func (a *bulkAnswer) listWritten(written []*entry, dryRun bool) {
	for _, e := range written {
		r := e.row
		res := bulkResult{Index: e.index, MemoryKey: r.MemoryKey, MemoryID: r.MemoryID, Verdict: e.v.kind, Status: r.Status}
		if !dryRun {
			res.Version, res.VersionText, res.Seq = r.Version, memrow.VersionText(r.Version), r.Seq
		}
		a.Written = append(a.Written, res)
	}
}

// bulkGapCheck sends the batch back when a revision committed since its capture may
// be a peer of any of its entries.
func (s *Service) bulkGapCheck(written []*entry) func([]gapRevision) error {
	return func(gap []gapRevision) error {
		now := s.now()
		back := &errGap{upTo: gap[len(gap)-1].seq}
		for _, g := range gap {
			for _, e := range written {
				if !e.row.Embedded() || e.restatement {
					continue
				}
				if !isPeer(g.row, e.peerQuery(), now) {
					continue
				}
				if g.row.ContentSHA256 != e.w.sha {
					if v, ok := s.vectors.Get(rowVectorKey(g.row)); ok && embed.Dot(v, e.w.vector) < e.threshold-vectorMargin {
						continue
					}
				}
				back.rows = append(back.rows, g.row)
				break
			}
		}
		if len(back.rows) == 0 {
			return nil
		}
		return back
	}
}
