package workers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/memrow"
)

// The sensitivity sweep (memory-architecture, "Background passes", sensitivity_sweep):
// its consumer group queues the value writes of the paths that skip the write path's
// detector (sweptOps: a consolidation's summary and a structured profile, whose text a
// model wrote), and a pass runs that detector over each head. A head it finds secret or
// personal data in gets a labelled version: a copy above the head it read, sensitivity
// high under the sensitive retention (command.SensitivityRelabel), which takes it out of
// every search leg and off the peers as a high memory.set would be. Only the head it
// scanned is relabelled (postgres-authority.md, "the sensitivity sweep's relabel goes
// above the head it scanned and only over that head"): one written since is another
// revision, queued in its own right when its path skips detection. The queue row is the
// version's stamp, so a replay relabels nothing twice. No model call: the detector is
// the write path's rules (command/sensitivity.go), so no provider is needed.

const opSensitivitySweep = "memory.sensitivity_sweep"

const sensitivityActor = "worker:sensitivity_sweep"

// workerSensitivity is the sensitivity sweep's name.
const workerSensitivity = "sensitivity_sweep"

// Outcomes of a swept item.
const (
	outcomeRelabelled = "relabelled" // the detector found something: the head is high now
	outcomeClean      = "clean"      // the detector found nothing
)

// sweptOps are the ops that write a value without the write path's detector. A new
// writer of model or imported text that skips it belongs here.
var sweptOps = map[string]bool{"memory.consolidate": true, "profile.build": true, opConsolidateProfile: true}

// owesSweep is the sweep's pick from a revision's plain fields: a value write of a
// path that skips detection, not already high, recent enough.
func owesSweep(env *events.Envelope, now time.Time, maxAge time.Duration) bool {
	rev := env.Revision
	return writesValue(env) && sweptOps[rev.Op] && memrow.Sensitivity(rev.Sensitivity) != memrow.SensitivityHigh &&
		env.CommittedAt.After(now.Add(-maxAge))
}

// RunSensitivitySweep runs the sensitivity sweep's passes until ctx ends.
func (s *Service) RunSensitivitySweep(ctx context.Context) {
	cfg := s.cfg.SensitivitySweep
	s.runPasses(ctx, workerSensitivity, cfg.Interval, cfg.MaxAge+24*time.Hour, s.sweepPass)
}

// sweepPass sweeps one batch, one head at a time.
func (s *Service) sweepPass(ctx context.Context) passResult {
	cfg := s.cfg.SensitivitySweep
	items, res, ok := s.claimPass(ctx, workerSensitivity, cfg.Batch, cfg.MaxAge, false)
	if !ok {
		return res
	}
	for _, it := range items {
		if ctx.Err() != nil {
			s.giveBack(it, s.soon(workerSensitivity), false)
			continue
		}
		out, detail, err := s.sweepHead(ctx, it)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("sensitivity sweep: a row stays owed", "org", it.org, "namespace", it.namespace, "memory_id", it.memoryID, "err", err)
			}
			res.errors++
			s.giveBack(it, s.soon(workerSensitivity), true)
			continue
		}
		if s.stamp(ctx, it, out, detail) == judgeDone {
			res.done++
		} else {
			res.errors++
		}
	}
	return res
}

// sweepHead runs the detector over the queued version's head and commits its labelled
// copy when it finds something; the outcome and the kinds found.
func (s *Service) sweepHead(ctx context.Context, it workItem) (string, any, error) {
	h, err := s.headOfID(ctx, it.org, it.namespace, it.memoryID)
	if err != nil {
		return "", nil, err
	}
	if h == nil || h.Version != it.version || h.Tombstone {
		return outcomeSkipped, nil, nil
	}
	row, kinds := s.cmd.SensitivityRelabel(h, s.now())
	if row == nil {
		return outcomeClean, nil, nil
	}
	row.Actor = sensitivityActor
	err = s.cmd.CommitWorkerPlan(ctx, command.WorkerPlan{Org: h.Org, Namespace: h.Namespace,
		RequestID: fmt.Sprintf("sensitivity_sweep:%s/%d", h.MemoryID, h.Version),
		Rows: []command.WorkerRow{{Op: opSensitivitySweep, Event: events.TypeStatusChanged, Row: row,
			ReadVersion: h.Version, ReadSeq: h.Seq}},
		InTx: refuseUnderErasure(h.Org)})
	switch {
	case errors.Is(err, command.ErrHeadMoved):
		// Written since the read: that write is the head now, and is swept (or was
		// detected) as its own revision.
		return outcomeSkipped, nil, nil
	case err != nil:
		return "", nil, fmt.Errorf("commit the relabel: %w", err)
	}
	return outcomeRelabelled, map[string]any{"kinds": kinds}, nil
}
