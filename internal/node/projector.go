package node

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/loomplane/loom/internal/kafka"
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
func (n *Node) RunProjector(ctx context.Context) error {
	n.projector.running.Store(true)
	defer n.projector.running.Store(false)
	pcfg := projector.Config{Name: n.Cfg.Projection, Topic: n.Cfg.Topic, Tables: tableset.Serving(), BatchRows: n.Cfg.ProjectorBatch,
		Interval: n.Cfg.PGPublishInterval, Attempts: n.Cfg.ProjectorAttempts, SessionTimeout: n.Cfg.ProjectorSession,
		Grace: n.Cfg.ShutdownGrace}
	p := projector.New(pcfg, n.PG, n.CH, n.Metrics, n.Log, n.ProjectorFaults)
	if n.Cfg.ProjectorRepair > 0 {
		rctx, stopRepair := context.WithCancel(ctx)
		repaired := make(chan struct{})
		go func() { defer close(repaired); p.RunRepair(rctx, n.Cfg.KafkaBrokers, n.Cfg.ProjectorRepair) }()
		defer func() { stopRepair(); <-repaired }()
	}
	for {
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- projectOnce(runCtx, p, pcfg, n.Cfg.KafkaBrokers) }()
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

// projectOnce runs p with a fresh group member until ctx ends.
func projectOnce(ctx context.Context, p *projector.Projector, pcfg projector.Config, brokers []string) error {
	consumer, err := kafka.NewClient(brokers, projector.ConsumerOpts(pcfg)...)
	if err != nil {
		return err
	}
	defer func() {
		// Leave the group at once, so a restarted projector need not wait out the
		// session and a reset finds the group empty.
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		consumer.LeaveGroupContext(cctx)
		cancel()
		consumer.Close()
	}()
	return p.Run(ctx, consumer)
}

// pauseProjector stops this process's projector when it runs projection name, and
// returns the function that starts it again (a no-op when nothing was paused).
func (n *Node) pauseProjector(ctx context.Context, name string) (resume func(), paused bool, err error) {
	if !n.Cfg.HasRole("projector") || n.Cfg.Projection != name || !n.projector.running.Load() {
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
