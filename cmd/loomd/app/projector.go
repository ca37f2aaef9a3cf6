package app

import (
	"context"
	"sync/atomic"

	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/tableset"
	"github.com/loomplane/loom/projector"
)

// projectorSwitch lets an admin request stop this process's projector (its consumer
// leaves the group, so the group's offsets may be moved) and start it again.
type projectorSwitch struct {
	running atomic.Bool
	pause   chan pauseRequest
}

// pauseRequest is answered by closing paused once the projector's consumer has left
// its group; the projector waits until resume is closed.
type pauseRequest struct {
	paused chan struct{}
	resume chan struct{}
}

func newProjectorSwitch() *projectorSwitch {
	return &projectorSwitch{pause: make(chan pauseRequest)}
}

// RunProjector runs the projector role for the configured projection until ctx ends,
// standing aside while an admin request holds it paused, and its repair pass every
// LOOM_PROJECTOR_REPAIR_INTERVAL_MS.
func (n *Process) RunProjector(ctx context.Context) error {
	n.projector.running.Store(true)
	defer n.projector.running.Store(false)
	p := projector.New(n.Cfg.Projector, n.Cfg.Pipeline, tableset.Serving(), n.PG, n.CH, n.Metrics, n.Log, n.ProjectorFaults)
	if n.Cfg.Projector.RepairInterval > 0 {
		rctx, stopRepair := context.WithCancel(ctx)
		repaired := make(chan struct{})
		go func() { defer close(repaired); p.RunRepair(rctx, n.Cfg.Kafka.Brokers) }()
		defer func() { stopRepair(); <-repaired }()
	}
	for {
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.RunMember(runCtx, n.Cfg.Kafka.Brokers) }()
		select {
		case err := <-done:
			stop()
			if ctx.Err() != nil {
				return nil
			}
			return err
		case req := <-n.projector.pause:
			stop()
			err := <-done
			close(req.paused)
			if err != nil && ctx.Err() == nil {
				n.Log.Warn("projector: stopped with an error before a pause", "err", err)
			}
			select {
			case <-req.resume:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// pauseProjector stops this process's projector when it runs projection name, and
// returns the function that starts it again (a no-op when nothing was paused).
func (n *Process) pauseProjector(ctx context.Context, name string) (resume func(), paused bool, err error) {
	if !n.Cfg.Roles.Has(config.RoleProjector) || n.Cfg.Pipeline.Projection != name || !n.projector.running.Load() {
		return func() {}, false, nil
	}
	req := pauseRequest{paused: make(chan struct{}), resume: make(chan struct{})}
	select {
	case n.projector.pause <- req:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	select {
	case <-req.paused:
	case <-ctx.Done():
		close(req.resume)
		return nil, false, ctx.Err()
	}
	return func() { close(req.resume) }, true, nil
}
