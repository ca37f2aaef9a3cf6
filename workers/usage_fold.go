package workers

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/command"
)

// The usage fold (memory-architecture, "Background passes", usage_fold): a paced loop,
// not a consumer of the topic, over memory.touch's counts (loom.memory_touches,
// command/touches_store.go). A pass leases the memories with touches, oldest first,
// and commits each head's reinforcement_count raised by its touches as an amendment of
// the head (its version kept) through the one commit; the commit's transaction takes
// the folded touches off the count, so a touch is folded exactly once, whatever pass
// dies where (the count is the stamp, as worker_items is the topic passes'). A head
// gone or no longer live drops its touches. Direction: each touch adds one to
// reinforcement_count, which search's prior reads (docs/architecture.md, "Background passes").

const opUsageFold = "memory.usage_fold"

const usageFoldActor = "worker:usage_fold"

// RunUsageFold runs the usage fold's passes until ctx ends.
func (s *Service) RunUsageFold(ctx context.Context) {
	s.runPasses(ctx, workerUsageFold, s.cfg.UsageFold.Interval, 0, s.foldPass)
}

// foldPass folds one batch of touched memories.
func (s *Service) foldPass(ctx context.Context) passResult {
	cfg := s.cfg.UsageFold
	ms, err := s.cmd.ClaimTouches(ctx, cfg.Batch, workLease)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("usage fold: reading the touches failed", "err", err)
		}
		return passResult{errors: 1}
	}
	res := passResult{claimed: len(ms), full: len(ms) == cfg.Batch}
	for _, m := range ms {
		if ctx.Err() != nil {
			s.releaseTouches(m)
			continue
		}
		if err := s.foldTouches(ctx, m); err != nil {
			if ctx.Err() == nil {
				s.log.Warn("usage fold: a memory's touches stay owed", "org", m.Org, "namespace", m.Namespace, "memory_id", m.MemoryID, "err", err)
			}
			res.errors++
			s.releaseTouches(m)
			continue
		}
		res.done++
	}
	return res
}

func (s *Service) releaseTouches(m command.TouchedMemory) {
	if err := s.cmd.ReleaseTouches(context.Background(), m, s.soon(workerUsageFold)); err != nil {
		s.log.Warn("usage fold: giving touches back failed; their lease will lapse", "err", err)
	}
}

// foldTouches commits one memory's touches into its head.
func (s *Service) foldTouches(ctx context.Context, m command.TouchedMemory) error {
	for try := 0; try < 3; try++ {
		h, err := s.headOfID(ctx, m.Org, m.Namespace, m.MemoryID)
		if err != nil {
			return err
		}
		if h == nil || !h.Live(s.now()) {
			return s.cmd.DropTouches(ctx, m)
		}
		prev, event, err := amendedRevision(ctx, s.pool, h.Identity, h.Version)
		if err != nil {
			return err
		}
		row := command.CopyOf(h)
		row.ReinforcementCount += m.Touches
		row.RecallCount += m.Recalls
		row.EvidenceCount += m.Evidence
		row.Actor = usageFoldActor
		guard := refuseUnderErasure(h.Org)
		err = s.cmd.CommitWorkerPlan(ctx, command.WorkerPlan{Org: h.Org, Namespace: h.Namespace,
			RequestID: fmt.Sprintf("usage_fold:%s/%d", h.MemoryID, h.Version),
			Rows: []command.WorkerRow{{Op: opUsageFold, Event: event, Row: row, ReadVersion: h.Version, ReadSeq: h.Seq,
				Amends: true, PrevVersion: prev}},
			InTx: func(ctx context.Context, tx pgx.Tx) error {
				if err := guard(ctx, tx); err != nil {
					return err
				}
				return command.FoldTouches(ctx, tx, m, m.Touches)
			}})
		if errors.Is(err, command.ErrHeadMoved) {
			continue
		}
		if err != nil {
			return fmt.Errorf("commit the folded touches: %w", err)
		}
		return nil
	}
	return command.ErrHeadMoved
}
