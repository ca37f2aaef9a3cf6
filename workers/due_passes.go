package workers

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/revisions"
	"github.com/loomplane/loom/internal/watermarks"
)

// The passes whose work is a namespace's, not a row's (entity_communities,
// recalibration, session_digest, reflection_distill) are consumers of the topic as the
// resolver is: each has a consumer group whose feed queues, in loom.worker_items, one
// item per record that concerns it (a revision for the namespace's graph or vectors,
// memory.turns_observed for its sessions), keyed by the record (dueItem), and commits
// its offsets once they are queued; entity_communities and recalibration, whose work
// any revision calls for whole, queue only each namespace's newest record of a polled
// batch (newestByNamespace). The item is the record's stamp: a replay or a
// redelivery queues what it queued and finds it done, so a namespace is not worked
// again for a record already worked (a redelivery cut into other batches may name
// another newest record: its namespace is due once more, and the pass's interval
// and stamp below put it off as any new record would). A pass claims a batch of namespaces with all
// their due items, works each namespace once for all of its items (many writes, one
// computation), and stamps them
// done only after the namespace's work is committed, or gives them back due later
// (the projection has not reached them yet, the namespace was worked within the pass's
// interval, a session is not yet quiet): the paced part of a pass whose work is
// periodic by nature is that due time, not a timer over every namespace. A pass killed
// mid-batch leaves its items owed under their lease, and the next pass (this process's
// or another's) works their namespaces; each namespace's work is replaced whole or
// guarded by its own stamp (the communities' computation, the backgrounds'
// recalibrated_at, a digest's or a label's window end), so nothing is written twice.

// dueRecordSpace names the items of records that are not a memory's version.
var dueRecordSpace = uuid.MustParse("7b0e8f1c-3d52-4f35-9c07-5a0f6c1d9e42")

// dueItem is a record's item for a pass fed by namespace: keyed by the record itself
// (its id as a name-based UUID, its seq as the version), so each record is one item.
func dueItem(worker string, env *events.Envelope) workItem {
	id := uuid.NewSHA1(dueRecordSpace, []byte(events.RecordID(env.Org, env.Namespace, env.Seq))).String()
	return workItem{worker: worker, org: env.Org, namespace: env.Namespace, memoryID: id, version: env.Seq, seq: env.Seq,
		writtenAt: env.CommittedAt}
}

// fedByNamespace reports whether a worker's items are namespaces' due marks.
func fedByNamespace(worker string) bool {
	return worker == workerCommunities || worker == workerRecalibration || worker == workerSessionDigest || worker == workerReflections
}

// pickDue is the feed's pick of a pass fed by namespace: the records that concern it,
// written within maxAge.
func (s *Service) pickDue(worker string, decoded []revisions.Record) []workItem {
	now := s.now()
	var maxAge time.Duration
	switch worker {
	case workerCommunities:
		maxAge = s.cfg.Communities.MaxAge
	case workerRecalibration:
		maxAge = s.cfg.Recalibration.MaxAge
	case workerSessionDigest:
		maxAge = s.cfg.SessionDigest.MaxAge
	case workerReflections:
		maxAge = s.cfg.ReflectionDistill.MaxAge
	}
	var items []workItem
	for _, d := range decoded {
		env := d.Env
		if !env.CommittedAt.After(now.Add(-maxAge)) {
			continue
		}
		switch worker {
		case workerCommunities, workerRecalibration:
			// Any revision may change the namespace's graph or its served vectors: a
			// write, a deletion, a restore, a status change.
			if d.Kind != revisions.Revision {
				continue
			}
		default:
			if env.Type != events.TypeTurnsObserved {
				continue
			}
		}
		items = append(items, dueItem(worker, env))
	}
	if worker == workerCommunities || worker == workerRecalibration {
		return newestByNamespace(items)
	}
	return items
}

// newestByNamespace keeps, of a batch's items, each namespace's newest: a pass whose
// work is the whole namespace's (its graph, its vectors) does for the newest record what
// it would do for all of them, so the older ones in the batch are a queue row, a claim
// and a stamp each that buy nothing (at load, one row per write per pass). The kept
// items are in the batch's order of their namespaces' first record.
func newestByNamespace(items []workItem) []workItem {
	at := map[[2]string]int{}
	out := items[:0:0]
	for _, it := range items {
		k := [2]string{it.org, it.namespace}
		i, ok := at[k]
		switch {
		case !ok:
			at[k], out = len(out), append(out, it)
		case it.seq > out[i].seq:
			out[i] = it
		}
	}
	return out
}

// The outcomes of the items of the passes fed by namespace.
const (
	outcomeComputed     = "computed"     // entity_communities: the namespace's communities computed after the record
	outcomeRecalibrated = "recalibrated" // recalibration: the namespace's backgrounds measured after the record (or too few vectors to)
	outcomeDigested     = "digested"     // session_digest: the namespace's sessions owe no digest of the record's turns
	outcomeDistilled    = "distilled"    // reflection_distill: the namespace's sessions owe no outcome of the record's turns
)

// errNotYet: the namespace is not due yet; its items are given back for later.
type errNotYet struct{ after time.Duration }

func (e errNotYet) Error() string { return "the namespace is not due yet" }

// notYet is errNotYet for after (a second at least).
func notYet(after time.Duration) error { return errNotYet{after: max(after, time.Second)} }

// dueNamespace is one namespace of a claimed batch: its items, and the newest record
// among them.
type dueNamespace struct {
	org, namespace string
	items          []workItem
	maxSeq         int64
}

// dueNamespacePass claims the due items of a batch of namespaces and works each namespace
// once (work), in the batch's order: the namespace's items are stamped done with
// outcome when work succeeds, given back due later when it answers errNotYet, given
// back after the pass's soon when it fails (one attempt), and every item left is given
// back untouched when the pass stops (errStopped: the model, an outage) or ctx ends.
func (s *Service) dueNamespacePass(ctx context.Context, worker string, batch int, maxAge time.Duration, outcome string,
	readsProjection bool, work func(ctx context.Context, ns dueNamespace) error) passResult {
	items, res, ok := s.claimPass(ctx, worker, batch, maxAge, false)
	if !ok {
		return res
	}
	var order []*dueNamespace
	byNS := map[[2]string]*dueNamespace{}
	for _, it := range items {
		k := [2]string{it.org, it.namespace}
		d := byNS[k]
		if d == nil {
			d = &dueNamespace{org: it.org, namespace: it.namespace}
			byNS[k], order = d, append(order, d)
		}
		d.items, d.maxSeq = append(d.items, it), max(d.maxSeq, it.seq)
	}
	for i, d := range order {
		if res.stopped || ctx.Err() != nil {
			for _, rest := range order[i:] {
				s.giveBackAll(rest.items, 0, false)
			}
			break
		}
		err := s.workNamespace(ctx, d, readsProjection, work)
		var later errNotYet
		switch {
		case err == nil:
			res.done += s.stampAll(ctx, d.items, outcome)
		case errors.As(err, &later):
			s.giveBackAll(d.items, later.after, false)
		case errors.Is(err, errOrgErasing):
			s.giveBackAll(d.items, s.soon(worker), false) // the org's rows wait for its erasure
		case errors.Is(err, errStopped):
			res.stopped, res.errors = true, res.errors+1
			s.giveBackAll(d.items, 0, false)
		default:
			res.errors++
			if ctx.Err() == nil {
				s.log.Warn(worker+": a namespace stays owed", "org", d.org, "namespace", d.namespace, "err", err)
			}
			s.giveBackAll(d.items, s.soon(worker), ctx.Err() == nil)
		}
	}
	return res
}

// giveBackAll releases a namespace's items after the pass that held them, in one
// statement (releaseWorkAll).
func (s *Service) giveBackAll(items []workItem, delay time.Duration, attempt bool) {
	if err := s.releaseWorkAll(context.Background(), items, delay, attempt); err != nil {
		s.log.Warn("worker: giving items back failed; their leases will lapse", "worker", items[0].worker, "err", err)
	}
}

// stampAll finishes a namespace's items, as stamp does each, in one statement, and
// answers how many it stamped; the rest (an erasure of their org runs) stay owed, given
// back due soon.
func (s *Service) stampAll(ctx context.Context, items []workItem, outcome string) int {
	if len(items) == 0 {
		return 0
	}
	stamped, err := s.finishWorkAll(context.WithoutCancel(ctx), items, outcome)
	if err != nil {
		s.log.Warn("worker: stamping items failed; they stay owed", "worker", items[0].worker, "err", err)
	}
	var rest []workItem
	for _, it := range items {
		if !stamped[it.key()] {
			rest = append(rest, it)
		}
	}
	if len(rest) > 0 {
		s.giveBackAll(rest, s.soon(items[0].worker), false)
	}
	return len(items) - len(rest)
}

// workNamespace works a claimed namespace. A pass that reads ClickHouse
// (readsProjection) works only the items the projection holds (holdProjected); with
// none, nothing is worked and d is left without items.
func (s *Service) workNamespace(ctx context.Context, d *dueNamespace, readsProjection bool, work func(context.Context, dueNamespace) error) error {
	if readsProjection {
		held, err := s.holdProjected(ctx, d)
		if err != nil || !held {
			return err
		}
	}
	return work(ctx, *d)
}

// holdProjected keeps of a namespace's items those the projection holds (seq at or
// below its watermark) and gives the rest back, due in a second: the passes that read
// ClickHouse read what it holds. It reports whether any is kept. A pass takes a
// namespace's items whole (claimNamespacesSQL), and under a steady load its newest
// are always ahead of the projection: waiting for all of them would put the namespace
// off for as long as the load lasts.
func (s *Service) holdProjected(ctx context.Context, d *dueNamespace) (bool, error) {
	mark, err := watermarks.Read(ctx, s.pool, s.pipe.Projection, d.org, d.namespace)
	if err != nil {
		return false, err
	}
	var held, later []workItem
	d.maxSeq = 0
	for _, it := range d.items {
		if it.seq > mark {
			later = append(later, it)
			continue
		}
		held, d.maxSeq = append(held, it), max(d.maxSeq, it.seq)
	}
	if len(later) > 0 {
		s.giveBackAll(later, time.Second, false)
	}
	d.items = held
	return len(held) > 0, nil
}

// spaced answers errNotYet while the namespace's last work (last; zero: never) is
// within the pass's interval: a busy namespace is worked at most once an interval.
func (s *Service) spaced(last time.Time, interval time.Duration) error {
	if next := last.Add(interval); !last.IsZero() && next.After(s.now()) {
		return notYet(next.Sub(s.now()))
	}
	return nil
}
