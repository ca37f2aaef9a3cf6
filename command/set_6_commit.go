package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/contentkey"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/groupcommit"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/idempotency"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/outbox"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/tracing"
	"github.com/loomplane/loom/internal/userref"
)

// Stage 6, the commit (set.go lists the stages): one transaction, grouped with the
// namespace's other plans in flight, and what came back classified for the round.

// commitRound commits a round's plan (a dry run only checks its gap) and classifies
// what came back. A gap that may hold peers goes to absorb, which measures it for the
// next round; a moved head or policy needs no more than a new read. retry reports
// either, with the seq the next round's gap check starts after. judging names what a
// gap too large to check stopped the commit from judging.
func (s *Service) commitRound(ctx context.Context, plan *commitPlan, dryRun bool, judging string, absorb func(*errGap) error) (retry bool, next int64, err error) {
	if dryRun {
		err = s.dryGap(ctx, plan)
	} else {
		s.faults.beforeCommit()
		err = s.commit(ctx, plan)
	}
	var gap *errGap
	var large *errGapTooLarge
	switch {
	case errors.As(err, &gap):
		s.commits.With("gap").Inc()
		if err := absorb(gap); err != nil {
			return false, 0, err
		}
		return true, gap.upTo, nil
	case errors.Is(err, errHeadMoved):
		s.commits.With("head_moved").Inc()
		return true, plan.gapFrom, nil
	case errors.Is(err, errPolicyMoved):
		s.commits.With("policy_moved").Inc()
		s.policies.drop(plan.org, plan.namespace)
		return true, plan.gapFrom, nil
	case errors.As(err, &large):
		// A capture far behind because the process's index is still applying a burst
		// of revisions (a usage fold's, an import's) is not contention: once the index
		// has them, the next round's capture covers them.
		if s.caughtUp(ctx, plan.org, plan.namespace, large.upTo) {
			s.commits.With("gap_caught_up").Inc()
			return true, plan.gapFrom, nil
		}
		// The seeds refuse excess admission work with ADMISSION_CONTENDED alone
		// (postgres-authority.md, Admission under concurrency).
		return false, 0, httperr.Unavailable(httperr.CodeAdmissionContended,
			"the namespace took more revisions than a commit examines (LOOM_PG_ADMISSION_GAP_MAX) while judging "+judging+"; retry", err)
	case err != nil:
		return false, 0, commitError(err)
	}
	if !dryRun {
		s.commits.With("committed").Inc()
		if err := s.faults.afterCommit(); err != nil {
			return false, 0, err
		}
	}
	return false, 0, nil
}

// pending is one row on its way to the commit, built over the head version it read
// (0: the key had no head).
type pending struct {
	own          bool // the write's own row, not a copy its verdict made of a peer
	op           string
	verdict      Verdict // what admission judged the own row against its peers; "" for copies and unjudged ops
	event        events.Type
	row          *memrow.Row
	readVersion  int64
	vector       []float32 // the value's vector, sealed with the content; nil: no search document
	keyVector    []float32
	chunkVectors [][]float32

	// amends marks derived metadata of the head it read (the entity extractor's): the
	// revision takes a seq and keeps the head's version and updated_at, so the version a
	// client was answered stays the head's and its preconditions hold. Its record's
	// prev_version is the version before that one (prevVersion), so a consumer sees
	// that revision again, amended; of one version, the later seq wins.
	amends      bool
	prevVersion int64
	// readSeq is the seq of the head it read (0: none, or not checked): an amendment
	// keeps the head's version, so the version alone does not show it landed.
	readSeq int64
	// refs name the row's user, agent, session and key as its columns store them,
	// computed by the commit before its transaction (nameRows).
	refs columnRefs
	// retiredRefs name the row under the org's retired key while a rotation runs (nil
	// when none runs): the commit revises a head named under it (retired_heads.go).
	retiredRefs *columnRefs
	// contentKey is the content key of the row's scope the commit holds (keyContent):
	// its hash is computed in Go. Empty: hashed in SQL.
	contentKey contentkey.Key
}

// commitPlan is one transaction's worth of rows: a write's own row first, then the
// copies of other heads its verdict changes.
type commitPlan struct {
	org, namespace string
	rows           []*pending
	requestID      string
	// The trace context of the commit's span, which its records carry.
	traceparent, tracestate string
	// policyGeneration is the policy generation the write read; the commit refuses
	// (errPolicyMoved) when a policy change landed since. Negative: not checked.
	policyGeneration int64
	// gapFrom is the last seq the write's verdict covered; revisions committed after
	// it are handed to gapCheck under the generation lock. nil gapCheck: no check.
	gapFrom  int64
	gapCheck func(gap []gapRevision) error
	// keyHeads, when set, are the heads of the write's key under every identity its
	// verdict was reached on (set_5_key_heads.go).
	keyHeads *keyHeadsCheck
	// idem is the request's Idempotency-Key hold: the commit marks it committed, or
	// stores answer's answer, done, when the plan has one.
	idem *idempotency.Hold
	// answer, when set, is the request's answer once the commit stamped the plan's rows
	// (their versions and seqs), which the commit stores under idem.
	answer func() any
	// inTx, when set, runs in the transaction once every head is locked and checked
	// and the rows have their versions, before anything is written: a last check
	// (an erasure requested meanwhile) and the records that land with the rows or
	// not at all. Its error rolls the commit back.
	inTx func(ctx context.Context, tx pgx.Tx) error
	// inCommit runs in the transaction once the rows are written; its error rolls the
	// commit back.
	inCommit func(ctx context.Context, tx pgx.Tx) error
	// record, when set, commits a record of the plan's own with its rows in the same
	// round trips (the transcript a write's facts are drawn from).
	record *planRecord
	// evidence names namespaces whose deletion evidence of any row's memory refuses
	// the commit (errErased): a copy from elsewhere (a restore) must not bring back
	// what an erasure removed, even one that lands while it runs.
	evidence []string
	// note, when set, is the write's own audit row (a bulk write's batch): its last
	// record carries it, with the seqs and memory ids of the plan's rows (notedOn).
	note *events.AuditNote
	// liveNamespace: the commit refuses a namespace namespace.delete soft-deleted (404),
	// read under the policy lock, so a delete lands before the commit or after it. A
	// judged write checks its policy generation instead; the copy writers set this.
	liveNamespace bool
}

var (
	// errHeadMoved sends a write back to read its heads again: another commit
	// changed a key it builds over.
	errHeadMoved = errors.New("a head moved since it was read")
	// errPolicyMoved sends a write back to read its namespace's policy again.
	errPolicyMoved = errors.New("the policy changed since it was read")
	// errErased: the write was built from the head of a memory an erasure removed
	// since; committing it would bring the memory back (404).
	errErased = errors.New("the memory was erased since its head was read")
)

// errGapTooLarge: more revisions landed after the write's capture than a commit
// examines. upTo is the generation the commit found.
type errGapTooLarge struct{ upTo int64 }

func (e *errGapTooLarge) Error() string {
	return fmt.Sprintf("the admission gap up to seq %d is larger than LOOM_PG_ADMISSION_GAP_MAX", e.upTo)
}

// commit commits a plan through commitPlans. Plans of one namespace that arrive while
// one of its commits is in flight wait and go in the next transaction together
// (internal/groupcommit): eight writers of one namespace take its generation lock
// once a transaction instead of once each. A plan with steps of its own (inTx,
// inCommit, evidence) commits alone; one with an Idempotency-Key is grouped, its key's
// row locked in the first batch and marked with the writes.
//
// The commit is a span of the caller's trace (loom.commit), and its records carry that
// span's context to the relay and the consumers (tracing.Context), whichever plan's
// transaction they commit in.
func (s *Service) commit(ctx context.Context, plan *commitPlan) (err error) {
	if tracing.On(s.tracer) {
		var span trace.Span
		ctx, span = s.tracer.Start(ctx, "loom.commit", trace.WithAttributes(attribute.Int("loom.rows", len(plan.rows))))
		defer func() {
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, "commit failed")
			} else if len(plan.rows) > 0 {
				span.SetAttributes(attribute.Int64("loom.seq", plan.rows[0].row.Seq))
			}
			span.End()
		}()
		plan.traceparent, plan.tracestate = tracing.Context(ctx)
	}
	if !plan.groupable() {
		return s.commitPlans(ctx, []*commitPlan{plan})[0]
	}
	return s.grouped.Do(ctx, plan.org+"/"+plan.namespace, plan)
}

func (p *commitPlan) groupable() bool {
	return p.inTx == nil && p.inCommit == nil && p.record == nil && len(p.evidence) == 0
}

// planRecord is a record a plan commits with its rows, under the seq after theirs:
// read queues its reads into the first batch, after the generation advance (so under
// its lock); write queues its writes after the rows', given that seq.
type planRecord struct {
	read  func(b *pgx.Batch)
	write func(b *pgx.Batch, seq int64) error
}

// Bounds of one grouped transaction.
const (
	maxGroupPlans = 64
	maxGroupRows  = 256
)

func newCommitGroup(s *Service) *groupcommit.Group[*commitPlan] {
	return groupcommit.New(maxGroupPlans, func(batch []*commitPlan, next *commitPlan) bool {
		rows := len(next.rows)
		for _, p := range batch {
			rows += len(p.rows)
		}
		return rows <= maxGroupRows
	}, s.commitPlans)
}

// errNoneAdmitted rolls back a grouped transaction none of whose plans passed its
// checks; each plan answers its own reason.
var errNoneAdmitted = errors.New("no plan of the group passed its checks")

// commitPlans is the one transaction every revision commits through, for one plan or
// a group of one namespace's plans in arrival order. In order: the org's policy lock
// (shared) and generation read; the namespace generation advanced by the number of
// rows, which locks it and draws their seqs (so a namespace's outbox rows are in seq
// order); every head locked; the gap's revisions read. Then each plan is checked as if
// it committed alone after the plans before it (checkPlan: its policy generation, its
// gap with the rows of the plans before, its heads): a plan that fails is left out and
// answers its reason, and the rest take consecutive seqs. Heads, revisions, data keys
// and outbox records are written, and either all of it commits or none. What runs
// while the generation lock is held is kept to two round trips: the first batch and
// the writes with the COMMIT (pg.InPipelinedTx); the relay is woken after the commit,
// not by a NOTIFY inside it (outbox.Waker).
func (s *Service) commitPlans(ctx context.Context, plans []*commitPlan) []error {
	errs := make([]error, len(plans))
	lead, alone := plans[0], len(plans) == 1
	now := s.now().UTC()
	var n int64
	var all []*pending
	for _, p := range plans {
		n += int64(len(p.rows))
		all = append(all, p.rows...)
	}
	drawn := n + lead.recordSeqs() // the seqs the advance draws: the rows', and the lead's record's
	// Read before the transaction: an org's first write makes its key, which must not
	// take round trips while the namespace's generation lock is held.
	live, err := s.userRefs.Live(ctx, lead.org)
	if err != nil {
		return failAll(errs, err)
	}
	refKey := live[0]
	if err := nameRows(plans, live); err != nil {
		return failAll(errs, err)
	}
	keys := s.keyContent(all)
	err = pg.InPipelinedTx(ctx, s.pool, func(tx pgx.Tx) (*pgx.Batch, error) {
		var policyGen, lastSeq int64
		b := &pgx.Batch{}
		b.Queue(fmt.Sprintf("SET LOCAL lock_timeout = %d", s.cfg.CommitLockTimeout.Milliseconds()))
		b.Queue(fmt.Sprintf("SELECT pg_advisory_xact_lock_shared(%s)", policyLockKey), lead.org)
		generations.QueueRead(b, lead.org, policyScope, &policyGen)
		deleted := queueNamespaceDeleted(b, plans)
		generations.QueueAdvance(b, lead.org, lead.namespace, drawn, &lastSeq)
		if lead.record != nil {
			lead.record.read(b) // under the advance's lock
		}
		locked, lockedSeqs := queueHeadLocks(b, all)
		// The gap is read in the same round trip, after the advance: every commit of the
		// namespace before this one has landed (it held the lock), and none after it can.
		gap := s.queueGroupGap(b, plans)
		keyHeads, err := queueKeyHeads(b, plans, live)
		if err != nil {
			return nil, fmt.Errorf("name the plans' keys by reference: %w", err)
		}
		held := make([]bool, len(plans)) // each plan's Idempotency-Key row, locked under its token
		for i, p := range plans {
			idempotency.QueueLock(b, p.idem, &held[i])
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return nil, fmt.Errorf("advance the generation, lock the heads and read the gap: %w", err)
		}
		// Only rows sealed before migration 155 take this round trip under the lock.
		if err := gap.unnamed.Name(ctx, tx); err != nil {
			return nil, fmt.Errorf("name the gap's users: %w", err)
		}
		next := lastSeq - drawn + 1 // the seq the next admitted row takes
		var before []gapRevision
		written, writtenKeys := map[string]bool{}, map[string]bool{}
		var admitted []*commitPlan
		off := 0
		for i, p := range plans {
			st := planState{policyGen: policyGen, namespaceDeleted: *deleted, firstSeq: next, gap: gap.of(p.gapFrom, before),
				linkedErased: gap.linkedErased[i], held: held[i], locked: locked[off : off+len(p.rows)], lockedSeqs: lockedSeqs[off : off+len(p.rows)],
				written: written, writtenKeys: writtenKeys, keyHeads: keyHeads[i]}
			off += len(p.rows)
			if err := s.checkPlan(ctx, tx, p, st); err != nil {
				if alone {
					return nil, err
				}
				errs[i] = err
				continue
			}
			next = stampRows(p, st, now, next, &before)
			admitted = append(admitted, p)
		}
		if len(admitted) == 0 {
			return nil, errNoneAdmitted
		}
		return s.writeAdmitted(ctx, tx, lead, admitted, lastSeq, next, refKey, keys)
	})
	if err == nil {
		s.relayWake.Queued()
		keys.Keep()
		s.rememberCommitted(plans, errs)
	}
	switch {
	case alone:
		errs[0] = err
	case err != nil && !errors.Is(err, errNoneAdmitted):
		// Nothing committed. A plan left out may have been left out for a row of the
		// group that did not commit: every plan answers the failure.
		return failAll(errs, err)
	}
	return errs
}

// writeAdmitted writes the admitted plans' rows in the commit's transaction, with the
// lead's hooks around them. It answers the writes' batch when nothing follows them, so
// the COMMIT goes in the same round trip, and nil when it sent them itself.
// keys is the read of the content keys the commit did not hold, queued after the writes
// that make them.
func (s *Service) writeAdmitted(ctx context.Context, tx pgx.Tx, lead *commitPlan, admitted []*commitPlan, lastSeq, next int64, refKey userref.Generation,
	keys *contentkey.Read) (*pgx.Batch, error) {
	if lead.inTx != nil {
		if err := lead.inTx(ctx, tx); err != nil {
			return nil, err
		}
	}
	b, err := s.writesBatch(lead, admitted, lastSeq, next, refKey)
	if err != nil {
		return nil, err
	}
	keys.Queue(b)
	// Each plan's key is marked with the writes (the first batch locked its row).
	for _, p := range admitted {
		if err := queueMark(b, p); err != nil {
			return nil, err
		}
	}
	if lead.inCommit == nil {
		return b, nil
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("write heads, revisions, keys and outbox records: %w", err)
	}
	return nil, lead.inCommit(ctx, tx)
}

// recordSeqs is the seqs the plan's own record takes: one, or none without one.
func (p *commitPlan) recordSeqs() int64 {
	if p.record == nil {
		return 0
	}
	return 1
}

// writesBatch queues the admitted plans' writes, then the lead's record under next,
// the seq after their rows', and gives back the seqs drawn up to lastSeq that no row
// took (the plans left out's).
func (s *Service) writesBatch(lead *commitPlan, admitted []*commitPlan, lastSeq, next int64, refKey userref.Generation) (*pgx.Batch, error) {
	recordSeq := next
	next += lead.recordSeqs() // a plan with a record commits alone: admitted
	b := &pgx.Batch{}
	if unused := lastSeq - (next - 1); unused > 0 {
		// The seqs of the plans left out go back: a namespace's seqs have no holes.
		generations.QueueGiveBack(b, lead.org, lead.namespace, unused)
	}
	if err := s.queueWrites(b, admitted, refKey); err != nil {
		return nil, err
	}
	if lead.record != nil {
		if err := lead.record.write(b, recordSeq); err != nil {
			return nil, err
		}
	}
	if s.relayWake == nil {
		outbox.QueueNotify(b)
	}
	return b, nil
}

// failAll answers err for every plan of a commit that committed nothing.
func failAll(errs []error, err error) []error {
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// stampRows gives an admitted plan's rows their ids, times, versions and seqs, from
// next on, and returns the seq after them; st.written and before learn the rows, so the
// plans after it in the group are checked against them.
func stampRows(p *commitPlan, st planState, now time.Time, next int64, before *[]gapRevision) int64 {
	for j, pr := range p.rows {
		r := pr.row
		if r.MemoryID == "" {
			r.MemoryID = uuid.NewString()
		}
		if r.CreatedAt.IsZero() {
			r.CreatedAt = now
		}
		if pr.amends {
			r.Version = st.locked[j] // checkPlan: the version it read
		} else {
			r.UpdatedAt = now
			r.Version = memrow.NextVersion(now, st.locked[j])
		}
		r.Seq = next
		next++
		st.written[heads.IdentityKey(r.Identity)] = true
		st.writtenKeys[r.MemoryKey] = true
		*before = append(*before, gapRevision{seq: r.Seq, row: r})
	}
	return next
}

// queueWrites queues the admitted plans' heads, revisions, data keys and outbox
// records: one statement per table for all their rows, so a commit's round trip does
// not grow by five statements for each copy a verdict makes.
func (s *Service) queueWrites(b *pgx.Batch, admitted []*commitPlan, userRefKey userref.Generation) error {
	var ps []*pending
	var rows []*memrow.Row
	var recs []*record
	for _, p := range admitted {
		for _, pr := range p.rows {
			rec, err := s.encode(pr, p, userRefKey)
			if err != nil {
				return err
			}
			ps, rows, recs = append(ps, pr), append(rows, pr.row), append(recs, rec)
		}
	}
	switch len(recs) {
	case 0:
		return nil
	case 1:
		// Most commits are one row: its statements keep their one-row plans.
		s.queueInsert(b, ps[0], recs[0])
		return nil
	}
	dataKeys := make([][]byte, len(recs))
	outboxRecs := make([]outbox.Record, len(recs))
	for i, rec := range recs {
		dataKeys[i] = rec.dataKey
		outboxRecs[i] = s.outboxRecord(rows[i], rec)
	}
	queueContentKeys(b, ps, recs)
	queueHeadWrites(b, ps, recs)
	queueRetiredHeadDeletes(b, ps)
	queueRevisions(b, ps, recs)
	queueRevisionKeys(b, rows, dataKeys)
	outbox.QueueMany(b, outboxRecs)
	return nil
}

// planState is what a plan of a commit is checked against: what the transaction read,
// and what the plans before it in the group write.
type planState struct {
	policyGen int64
	// namespaceDeleted: the namespace is soft-deleted (read only for a plan that
	// asks, liveNamespace).
	namespaceDeleted bool
	firstSeq         int64 // the seq the plan's first row would take
	gap              []gapRevision
	linkedErased     bool
	held             bool            // the plan's Idempotency-Key (if any) is still its request's
	locked           []int64         // the versions of the plan's rows' heads, as locked
	lockedSeqs       []int64         // and their seqs
	written          map[string]bool // identities the plans before it write
	writtenKeys      map[string]bool // and their keys
	keyHeads         []int64         // the seqs of the heads of the plan's key (keyHeads), ascending
}

// checkPlan checks a plan as its own commit would: its policy generation, its gap
// (with the rows of the plans before it), the erasures linked to its verdict, and its
// heads, which must be the versions its rows were built over.
func (s *Service) checkPlan(ctx context.Context, tx pgx.Tx, plan *commitPlan, st planState) error {
	if !st.held {
		return idempotency.ErrTakenOver // a retry took the key over: this request writes nothing
	}
	if plan.policyGeneration >= 0 && st.policyGen != plan.policyGeneration {
		return errPolicyMoved
	}
	if plan.liveNamespace && st.namespaceDeleted {
		return namespaceDeleted(plan.namespace)
	}
	if plan.gapCheck != nil && st.firstSeq-1 > plan.gapFrom {
		if st.firstSeq-1-plan.gapFrom > int64(s.cfg.AdmissionGapMax) {
			return &errGapTooLarge{upTo: st.firstSeq - 1}
		}
		// A gap whose revisions were all erased holds nothing left to be a peer.
		if len(st.gap) > 0 {
			if err := plan.gapCheck(st.gap); err != nil {
				return err
			}
		}
		// A verdict that links the write to a memory an erasure removed in the gap
		// is reached again on peers read anew.
		if st.linkedErased {
			return errHeadMoved
		}
	}
	if len(plan.evidence) > 0 {
		ids := make([]string, len(plan.rows))
		for i, p := range plan.rows {
			ids[i] = p.row.MemoryID
		}
		if erased, err := s.erasedIn(ctx, tx, plan.org, plan.evidence, ids); err != nil {
			return err
		} else if len(erased) > 0 {
			return errErased
		}
	}
	for i, p := range plan.rows {
		if st.written[heads.IdentityKey(p.row.Identity)] {
			return errHeadMoved // a plan before it in the group revises the same head
		}
		if st.locked[i] != p.readVersion || (p.readSeq != 0 && st.lockedSeqs[i] != p.readSeq) {
			// Checked after the generation lock an erasure holds while it removes
			// heads: a head that is gone because it was erased is not written back.
			if p.own && p.readVersion != 0 {
				erased, err := s.erasedAmong(ctx, tx, plan.org, plan.namespace, []string{p.row.MemoryID})
				if err != nil {
					return err
				}
				if erased {
					return errErased
				}
			}
			return errHeadMoved
		}
	}
	// After the rows' own heads: an erased own head answers errErased.
	if plan.keyHeads != nil && !plan.keyHeads.holds(st.keyHeads, st.writtenKeys) {
		return errHeadMoved
	}
	return nil
}

// rememberCommitted tells the process's recent keys (predictRound) the keys of the
// plans a commit wrote.
func (s *Service) rememberCommitted(plans []*commitPlan, errs []error) {
	for i, p := range plans {
		if errs[i] != nil {
			continue
		}
		for _, pr := range p.rows {
			s.recent.add(p.org, p.namespace, pr.row.MemoryKey)
		}
	}
}

// queueHeadLocks queues a lock of every row's head, in identity order, in one
// statement, and returns the versions they read (0 when the key has none), filled when
// the batch is sent. They run after the generation advance, so every commit of the
// namespace is already serialised and no two take head locks in another order.
func queueHeadLocks(b *pgx.Batch, rows []*pending) (versions, seqs []int64) {
	order := make([]int, len(rows))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool {
		return heads.IdentityKey(rows[order[a]].row.Identity) < heads.IdentityKey(rows[order[b]].row.Identity)
	})
	versions, seqs = make([]int64, len(rows)), make([]int64, len(rows))
	ids, versionsOf, seqsOf := make([]memrow.Identity, len(rows)), make([]*int64, len(rows)), make([]*int64, len(rows))
	refs, retired := make([]columnRefs, len(rows)), make([]*columnRefs, len(rows))
	anyRetired := false
	for j, i := range order {
		ids[j], refs[j], versionsOf[j], seqsOf[j] = rows[i].row.Identity, rows[i].refs, &versions[i], &seqs[i]
		retired[j] = rows[i].retiredRefs
		anyRetired = anyRetired || retired[j] != nil
	}
	if !anyRetired {
		retired = nil
	}
	if len(ids) > 0 {
		queueLockHeads(b, ids, refs, retired, versionsOf, seqsOf)
	}
	return versions, seqs
}

// record is a revision encoded for the topic and the journal.
type record struct {
	key     []byte
	dataKey []byte // as stored: wrapped under the KEK
	value   []byte // the envelope, its content to be sealed by the relay (encodeReference)
	vectors []byte // what the relay seals with the journal's text
	headers []byte
	payload []byte // the head row as JSON, without its text
	sealed  []byte // the row's text sealed at rest (heads.AtRest)
	audit   []byte
	// contentKey is a fresh key for the row's scope (org, namespace, user), as stored:
	// the scope's key if it has none yet (loom.content_keys, migration 101).
	contentKey []byte
}

// encode seals the revision's content under a fresh data key and builds its envelope,
// CloudEvents headers and hash-only audit row.
func (s *Service) encode(p *pending, plan *commitPlan, userRefKey userref.Generation) (*record, error) {
	requestID := plan.requestID
	row := p.row
	if row.Tags == nil {
		// A row's tags are a list, in the head, the journal and the topic: readers
		// that unnest them (the extractor's categories) fail on a JSON null.
		row.Tags = []string{}
	}
	dataKey, err := events.NewDataKey()
	if err != nil {
		return nil, err
	}
	prev := p.readVersion
	if p.amends {
		prev = p.prevVersion
	}
	note := plan.notedOn(p)
	value, headers, vectors, err := encodeReference(revisionRecord{row: row, op: p.op, verdict: string(p.verdict), event: p.event, prevVersion: prev,
		requestID: requestID, vector: p.vector, keyVector: p.keyVector, chunkVectors: p.chunkVectors, userRefKey: userRefKey.Key,
		refGen: userRefKey.Gen, traceparent: plan.traceparent, tracestate: plan.tracestate, audit: note}, dataKey, s.cfg.EventSource)
	if err != nil {
		return nil, err
	}
	payload, sealed, err := heads.AtRest(row, dataKey)
	if err != nil {
		return nil, err
	}
	storedKey, err := s.storedKey(dataKey)
	if err != nil {
		return nil, err
	}
	// The audit's content_sha256 is the keyed one, set where the journal row is written
	// (queueRevisions). It names no user, key, agent or session: the row's columns hold
	// their references and its sealed text the clear values (migrations 155, 171, 173).
	journalAudit := map[string]any{
		"op": p.op, "event_type": p.event, "actor": row.Actor, "memory_id": row.MemoryID, "version": row.Version,
		"source_class": row.SourceClass, "status": row.Status,
		"pinned": row.Pinned, "tombstone": row.Tombstone, "request_id": requestID,
	}
	if p.verdict != "" {
		journalAudit["verdict"] = p.verdict // a republish of the record carries it again
	}
	if note != nil {
		journalAudit["note"] = note // a republish of the record carries it again
	}
	audit, err := json.Marshal(journalAudit)
	if err != nil {
		return nil, err
	}
	contentKey, err := events.NewDataKey()
	if err != nil {
		return nil, err
	}
	if contentKey, err = s.storedKey(contentKey); err != nil {
		return nil, err
	}
	return &record{key: events.RecordKey(row.Org, row.Namespace), dataKey: storedKey, value: value, vectors: vectors,
		headers: headers, payload: payload, sealed: sealed, audit: audit, contentKey: contentKey}, nil
}

// notedOn is the plan's audit note as row p's record carries it: on the plan's last
// row only, once the rows are stamped, naming their seqs and memory ids (listed up to
// events.MaxNoteMembers, else by count and digest).
func (plan *commitPlan) notedOn(p *pending) *events.AuditNote {
	if plan.note == nil || p != plan.rows[len(plan.rows)-1] {
		return nil
	}
	n := *plan.note
	n.FirstSeq, n.LastSeq = plan.rows[0].row.Seq, p.row.Seq
	ids := make([]string, len(plan.rows))
	for i, r := range plan.rows {
		ids[i] = r.row.MemoryID
	}
	n.SetMembers(ids)
	return &n
}

// queueInsert queues the writes of one row: its head, its revision, its data key and
// its outbox record, which references the revision (encodeReference).
func (s *Service) queueInsert(b *pgx.Batch, p *pending, rec *record) {
	row := p.row
	queueContentKey(b, row, p.refs, rec.contentKey)
	queueHeadWrite(b, p, rec)
	queueRetiredHeadDeletes(b, []*pending{p})
	queueRevision(b, p, rec)
	queueRevisionKey(b, row, rec.dataKey)
	outbox.Queue(b, s.outboxRecord(row, rec))
}

// outboxRecord is row's outbox record: its encoded revision, to the change topic.
func (s *Service) outboxRecord(row *memrow.Row, rec *record) outbox.Record {
	return outbox.Record{Org: row.Org, Namespace: row.Namespace, Seq: row.Seq, Topic: s.cfg.Topic,
		Key: rec.key, Headers: rec.headers, Value: rec.value, Vectors: rec.vectors}
}

// queueNamespaceDeleted queues, when a plan asks (liveNamespace), the read of whether
// the plans' namespace is soft-deleted; the answer is false otherwise.
func queueNamespaceDeleted(b *pgx.Batch, plans []*commitPlan) *bool {
	deleted := new(bool)
	for _, p := range plans {
		if p.liveNamespace {
			b.Queue(`SELECT EXISTS (SELECT 1 FROM loom.namespaces WHERE org = $1 AND namespace = $2 AND deleted_at IS NOT NULL)`,
				p.org, p.namespace).QueryRow(func(r pgx.Row) error { return r.Scan(deleted) })
			break
		}
	}
	return deleted
}

// nameRows names every row of the plans by reference under their org's key (columnRefs),
// before the transaction: its statements bind them.
func nameRows(plans []*commitPlan, live []userref.Generation) error {
	for _, p := range plans {
		for _, pr := range p.rows {
			if pr.row.Org != p.org {
				// The commit holds one org's key: a row of another would be named under it.
				return fmt.Errorf("a row of org %q in a commit of org %q", pr.row.Org, p.org)
			}
			refs, err := columnRefsOf(live[0].Key, pr.row.Identity)
			if err != nil {
				return err
			}
			pr.refs = refs
			if err := nameRetired(pr, live); err != nil {
				return err
			}
		}
	}
	return nil
}
