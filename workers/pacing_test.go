package workers

import (
	"context"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/config"
)

// One pass at a time: a second pass waits for the first to leave, then for the rest
// after it (three times the first's time at the default ratio), and a pass that took
// nothing measurable leaves no rest behind.
func TestThePassGateRunsOnePassAtATimeAndRestsAfterEach(t *testing.T) {
	g := newPassGate(config.PassPacing{Concurrency: 1, RestRatio: 3})
	ctx := context.Background()
	if !g.enter(ctx) {
		t.Fatal("the first pass did not enter")
	}
	entered := make(chan time.Time)
	go func() {
		g.enter(ctx)
		entered <- time.Now()
	}()
	select {
	case <-entered:
		t.Fatal("a second pass entered while the first ran")
	case <-time.After(50 * time.Millisecond):
	}
	left := time.Now()
	g.leave(40 * time.Millisecond)
	if waited := (<-entered).Sub(left); waited < 120*time.Millisecond {
		t.Fatalf("the second pass entered %s after the first left; want its rest, 3 × 40ms, first", waited)
	}
	g.leave(0)
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if !g.enter(short) {
		t.Fatal("a pass after one that took no time waited past a second")
	}
	g.leave(0)
}

// A rest is bounded (a long batch of model calls does not stop the other passes for
// long), and a cancelled wait gives its slot back.
func TestThePassGateBoundsItsRestAndFreesTheSlotOnCancel(t *testing.T) {
	g := newPassGate(config.PassPacing{Concurrency: 1, RestRatio: 3})
	g.enter(context.Background())
	g.leave(time.Hour)
	if rest := time.Until(g.free); rest > maxPassRest {
		t.Fatalf("a rest of %s after an hour's pass; want at most %s", rest, maxPassRest)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if g.enter(ctx) {
		t.Fatal("a pass entered during the rest")
	}
	if len(g.slots) != 0 {
		t.Fatalf("%d slots held after a cancelled wait; want none", len(g.slots))
	}
}

// With LOOM_WORKERS_PASS_GATE=background (the default) the conflict resolver, a
// flagged write's follow-up, skips the gate, and every other pass takes its turn; with
// all every pass does.
func TestTheGateOverBackgroundPassesLeavesOutTheResolver(t *testing.T) {
	for _, c := range []struct {
		gate    string
		ungated []string
	}{{config.GateAll, nil}, {config.GateBackground, []string{workerResolver}}} {
		s := &Service{cfg: config.Workers{Pacing: config.PassPacing{Concurrency: 1, Gate: c.gate}}}
		for _, w := range Names() {
			want := true
			for _, u := range c.ungated {
				want = want && w != u
			}
			if got := s.gated(w); got != want {
				t.Errorf("gate %s: %s gated %t, want %t", c.gate, w, got, want)
			}
		}
	}
}
