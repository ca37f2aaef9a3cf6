package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/revisions"
)

// The usage fold (memory-architecture, "Background passes", usage_fold): a consumer of
// the topic, as the resolver is. The command role publishes the usage it counted
// (memory.touch, search's served hits, evidence events) as one memory.usage_recorded
// record per namespace every LOOM_USAGE_PUBLISH_INTERVAL_MS
// (command/usage_publish.go); the fold's group queues, in loom.worker_items, one item
// per memory a record counts, keyed by the memory and the record's seq, with its
// counts. A pass claims a batch, sums each memory's items and commits the head's
// reinforcement_count, recall_count and evidence_count raised by them as an amendment
// of the head (its version kept) through the one commit, its items stamped done in
// that commit's transaction: a count is folded with its stamp or not at all, so a
// redelivered or replayed record (its items found done), or a pass killed anywhere,
// folds nothing twice. A head gone or no longer live drops its counts. Direction: each
// touch adds one to reinforcement_count, which search's prior reads
// (docs/architecture.md, "Background passes").

const opUsageFold = "memory.usage_fold"

const usageFoldActor = "worker:usage_fold"

// RunUsageFold runs the usage fold's passes until ctx ends.
func (s *Service) RunUsageFold(ctx context.Context) {
	cfg := s.cfg.UsageFold
	s.runPasses(ctx, workerUsageFold, cfg.Interval, cfg.MaxAge+24*time.Hour, s.foldPass)
}

// usageCounts is a usage item's counts as its work item keeps them (detail).
type usageCounts struct {
	Touches  int `json:"touches,omitempty"`
	Recalls  int `json:"recalls,omitempty"`
	Evidence int `json:"evidence,omitempty"`
}

// pickUsage is the fold's feed: an item per memory each usage record written within
// the fold's age limit counts. A memory id that is not one (a record Loom did not
// write) is left out rather than holding the feed.
func (s *Service) pickUsage(decoded []revisions.Record) []workItem {
	since := s.now().Add(-s.cfg.UsageFold.MaxAge)
	var items []workItem
	for _, d := range decoded {
		env := d.Env
		if env.Type != events.TypeUsageRecorded || env.Usage == nil || !env.CommittedAt.After(since) {
			continue
		}
		for _, u := range env.Usage.Items {
			if _, err := uuid.Parse(u.MemoryID); err != nil {
				s.log.Warn("usage fold: a usage record names no memory id; the item is skipped", "record", env.ID, "memory_id", u.MemoryID)
				continue
			}
			detail, _ := json.Marshal(usageCounts{Touches: u.Touches, Recalls: u.Recalls, Evidence: u.Evidence})
			items = append(items, workItem{worker: workerUsageFold, org: env.Org, namespace: env.Namespace, memoryID: u.MemoryID,
				version: env.Seq, seq: env.Seq, writtenAt: env.CommittedAt, detail: detail})
		}
	}
	return items
}

// foldPass folds one batch of items: each memory's items in one commit.
func (s *Service) foldPass(ctx context.Context) passResult {
	cfg := s.cfg.UsageFold
	items, res, ok := s.claimPass(ctx, workerUsageFold, cfg.Batch, cfg.MaxAge, false)
	if !ok {
		return res
	}
	var order [][]workItem
	byMemory := map[[3]string]int{}
	for _, it := range items {
		k := [3]string{it.org, it.namespace, it.memoryID}
		i, seen := byMemory[k]
		if !seen {
			i, byMemory[k] = len(order), len(order)
			order = append(order, nil)
		}
		order[i] = append(order[i], it)
	}
	for from := 0; from < len(order); {
		if ctx.Err() != nil {
			for _, rest := range order[from:] {
				s.giveBackAll(rest, 0, false)
			}
			break
		}
		// A run of memories of one namespace is folded in one commit; a run that cannot
		// commit whole (a head moved, an item taken) is folded a memory at a time.
		to := from + 1
		for to < len(order) && to-from < foldCommitMemories && order[to][0].org == order[from][0].org && order[to][0].namespace == order[from][0].namespace {
			to++
		}
		run := order[from:to]
		from = to
		if len(run) > 1 {
			done, folded, err := s.foldMemories(ctx, run)
			if err == nil && folded {
				res.done += done
				continue
			}
			if err != nil && ctx.Err() == nil {
				s.log.Debug("usage fold: a run of memories did not commit together; folding them one at a time", "memories", len(run), "err", err)
			}
		}
		for _, its := range run {
			s.foldOne(ctx, its, &res)
		}
	}
	return res
}

// foldCommitMemories is how many memories' counts one commit of the usage fold takes:
// a search workload's usage is a record naming every memory it served, and a commit
// each was a transaction each (its generation advance, its erasure check, its stamps).
const foldCommitMemories = 64

// foldOne folds one memory's items and counts the outcome into res.
func (s *Service) foldOne(ctx context.Context, its []workItem, res *passResult) {
	done, err := s.foldMemory(ctx, its)
	switch {
	case err == nil:
		res.done += done
	case errors.Is(err, errOrgErasing):
		s.giveBackAll(its, s.soon(workerUsageFold), false) // the org's rows wait for its erasure
	default:
		res.errors++
		if ctx.Err() == nil {
			s.log.Warn("usage fold: a memory's counts stay owed", "org", its[0].org, "namespace", its[0].namespace, "memory_id", its[0].memoryID, "err", err)
		}
		s.giveBackAll(its, s.soon(workerUsageFold), ctx.Err() == nil)
	}
}

// sumUsage adds up the counts of one memory's items.
func sumUsage(items []workItem) (usageCounts, error) {
	var sum usageCounts
	for _, it := range items {
		var c usageCounts
		if err := json.Unmarshal(it.detail, &c); err != nil {
			return usageCounts{}, fmt.Errorf("read the item's counts: %w", err)
		}
		sum.Touches, sum.Recalls, sum.Evidence = sum.Touches+c.Touches, sum.Recalls+c.Recalls, sum.Evidence+c.Evidence
	}
	return sum, nil
}

// foldedRow is the head amended by a memory's summed counts, as the fold commits it.
func foldedRow(h *memrow.Row, sum usageCounts) *memrow.Row {
	row := command.CopyOf(h)
	row.ReinforcementCount += sum.Touches
	row.RecallCount += sum.Recalls
	row.EvidenceCount += sum.Evidence
	row.Actor = usageFoldActor
	return row
}

// foldMemories commits the items of several memories of one namespace (run, a memory's
// items each) into their heads in one commit, as foldMemory does one: their heads read
// in one statement, each live one amended, every item stamped in the commit's
// transaction. folded is false when the run did not commit whole and nothing of it
// was written or stamped (a head gone or moved, an item another pass took, a failure):
// the caller folds its memories one at a time, which decides each memory's outcome.
func (s *Service) foldMemories(ctx context.Context, run [][]workItem) (done int, folded bool, err error) {
	first := run[0][0]
	ids := make([]string, len(run))
	for i, its := range run {
		ids[i] = its[0].memoryID
	}
	hs, err := s.headsByID(ctx, first.org, first.namespace, ids)
	if err != nil {
		return 0, false, err
	}
	byID := make(map[string]*memrow.Row, len(hs))
	for _, h := range hs {
		byID[h.MemoryID] = h
	}
	live := make([]*memrow.Row, len(run))
	sums := make([]usageCounts, len(run))
	var items []workItem
	for i, its := range run {
		h := byID[its[0].memoryID]
		if h == nil || !h.Live(s.now()) {
			return 0, false, nil // its items are stamped dropped by foldMemory
		}
		if sums[i], err = sumUsage(its); err != nil {
			return 0, false, err
		}
		live[i] = h
		items = append(items, its...)
	}
	prevs, evs, err := command.AmendedRevisions(ctx, s.pool, live)
	if err != nil {
		return 0, false, fmt.Errorf("read the revisions the fold amends: %w", err)
	}
	rows := make([]command.WorkerRow, len(live))
	for i, h := range live {
		rows[i] = foldedRevision(h, sums[i], prevs[i], evs[i])
	}
	requestID := fmt.Sprintf("usage_fold:%s/%d+%d", rows[0].Row.MemoryID, rows[0].ReadVersion, len(rows)-1)
	if err := s.commitFold(ctx, first.org, first.namespace, requestID, rows, items); err != nil {
		return 0, false, err
	}
	return len(items), true, nil
}

// foldRow is the fold's revision of head h amended by sum.
func foldRow(ctx context.Context, pool *pgxpool.Pool, h *memrow.Row, sum usageCounts) (command.WorkerRow, error) {
	prev, event, err := amendedRevision(ctx, pool, h.Identity, h.Version)
	if err != nil {
		return command.WorkerRow{}, err
	}
	return foldedRevision(h, sum, prev, event), nil
}

// foldedRevision is the fold's revision of head h amended by sum, over the version
// before h's (prev) with its revision's event type.
func foldedRevision(h *memrow.Row, sum usageCounts, prev int64, event events.Type) command.WorkerRow {
	return command.WorkerRow{Op: opUsageFold, Event: event, Row: foldedRow(h, sum), ReadVersion: h.Version, ReadSeq: h.Seq,
		Amends: true, PrevVersion: prev}
}

// commitFold commits the fold's rows and stamps their items folded in the same
// transaction, refused while an erasure of the org runs.
func (s *Service) commitFold(ctx context.Context, org, ns, requestID string, rows []command.WorkerRow, items []workItem) error {
	guard := refuseUnderErasure(org)
	return s.cmd.CommitWorkerPlan(ctx, command.WorkerPlan{Org: org, Namespace: ns, RequestID: requestID, Rows: rows,
		InTx: func(ctx context.Context, tx pgx.Tx) error {
			if err := guard(ctx, tx); err != nil {
				return err
			}
			return finishWorkTx(ctx, tx, items, outcomeFolded)
		}})
}

// foldMemory commits one memory's items (its counts of one or more records) into its
// head, and returns how many items it stamped done.
func (s *Service) foldMemory(ctx context.Context, items []workItem) (int, error) {
	sum, err := sumUsage(items)
	if err != nil {
		return 0, err
	}
	first := items[0]
	for try := 0; try < 3; try++ {
		h, err := s.headOfID(ctx, first.org, first.namespace, first.memoryID)
		if err != nil {
			return 0, err
		}
		if h == nil || !h.Live(s.now()) {
			done := 0
			for _, it := range items {
				if s.stamp(ctx, it, outcomeDropped, nil) == judgeDone {
					done++
				}
			}
			return done, nil
		}
		row, err := foldRow(ctx, s.pool, h, sum)
		if err != nil {
			return 0, err
		}
		err = s.commitFold(ctx, h.Org, h.Namespace, fmt.Sprintf("usage_fold:%s/%d", h.MemoryID, h.Version), []command.WorkerRow{row}, items)
		switch {
		case errors.Is(err, command.ErrHeadMoved):
			continue
		case errors.Is(err, errStampTaken):
			return 0, nil // another pass folded them: nothing is folded twice
		case err != nil:
			return 0, fmt.Errorf("commit the folded counts: %w", err)
		}
		return len(items), nil
	}
	return 0, command.ErrHeadMoved
}
