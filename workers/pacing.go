package workers

import (
	"context"
	"sync"
	"time"

	"github.com/loomplane/loom/internal/config"
)

// Pacing (memory-architecture, "Background passes": passes never slow the primary
// write). Each pass already takes a bounded batch and waits its interval when it finds
// nothing; the gate bounds the passes of one process together, and the batches their
// topic feeds read (RunFeed), whatever their intervals (the conflict resolver skips it
// by default: gated): at most
// LOOM_WORKERS_PASS_CONCURRENCY run at once (one by default, so the role never holds
// more than one pass's connection and CPU), and after each the process's passes rest
// LOOM_WORKERS_PASS_REST_RATIO times as long as it took (3 by default: passes hold the
// role at most a quarter of the time). A backlog still drains (a full batch runs again
// after its rest) at a pace the write path barely feels.

// gated reports whether worker's passes and feed take their turn at the gate: with
// LOOM_WORKERS_PASS_GATE=background (the default), all but the conflict resolver's,
// which follows a write its admission flagged and so waits behind no other pass's
// batch and rest; with all, every worker's. Measured behind a busy session_digest pass
// (3 s batches), the resolver judged a conflicting write 1.5 s after it at the median
// with background, 37 s with all (tests/workers/resolver_delay_bench_test.go). The
// entity extractor stays gated: it owes every write naming no entity, and ungated
// beside the other passes it did 24× the rows and memory.set's p50 went from 1.00× to
// 1.38× none's (one noisy run each; docs/bench/RESULTS-passes.md), while the resolver
// works only the conflicts.
func (s *Service) gated(worker string) bool {
	return s.cfg.Pacing.Gate != config.GateBackground || worker != workerResolver
}

// enterGate takes worker's turn at the gate when it is gated (gated); false when ctx
// ended first. leaveGate ends the turn.
func (s *Service) enterGate(ctx context.Context, worker string) bool {
	if !s.gated(worker) {
		return ctx.Err() == nil
	}
	return s.gate.enter(ctx)
}

func (s *Service) leaveGate(worker string, took time.Duration) {
	if s.gated(worker) {
		s.gate.leave(took)
	}
}

// maxPassRest bounds the rest after one long pass (a batch of model calls, mostly
// waiting on the model), so a slow model does not stop the other passes for long.
const maxPassRest = 5 * time.Second

// passGate is the budget of pass work in this process.
type passGate struct {
	slots chan struct{}
	ratio float64
	mu    sync.Mutex
	free  time.Time // no pass starts before this: the rest after the last one
}

func newPassGate(p config.PassPacing) *passGate {
	return &passGate{slots: make(chan struct{}, max(p.Concurrency, 1)), ratio: p.RestRatio}
}

// enter waits for a slot and for the rest after the last pass to end; false when ctx
// ended first.
func (g *passGate) enter(ctx context.Context) bool {
	select {
	case g.slots <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	for {
		g.mu.Lock()
		wait := time.Until(g.free)
		g.mu.Unlock()
		if wait <= 0 {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			<-g.slots
			return false
		case <-t.C:
		}
	}
}

// leave gives the slot back after a pass that took took, and sets the rest after it.
func (g *passGate) leave(took time.Duration) {
	rest := min(time.Duration(float64(took)*g.ratio), maxPassRest)
	g.mu.Lock()
	if until := time.Now().Add(rest); until.After(g.free) {
		g.free = until
	}
	g.mu.Unlock()
	<-g.slots
}

// owedRecount is how often an idle pass counts what it owes: a pass that took nothing
// leaves the count as it was (only a write or another process's pass moves it), so
// a pass that finds nothing costs its one read.
const owedRecount = 30 * time.Second
