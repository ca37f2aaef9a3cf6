// Package gcpace paces the Go collector of a process whose live heap is small. Go
// collects each time the heap reaches twice its live part (GOGC 100), and each
// collection marks the whole live heap: a loomd whose live heap is tens of MiB
// collects many times a second under writes, and that marking was 0.3-0.5 ms of its
// ~2.2 ms CPU a write at one writer (docs/bench/RESULTS-write.md, h35-gc). A floor lets such a
// heap grow to a fixed size before it is collected; a heap past half the floor is
// paced as Go paces it.
package gcpace

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// goPercent is Go's own pace: collect when the heap is twice its live part.
const goPercent = 100

// minLive is Go's smallest heap goal (4 MiB at GOGC 100), which grows with the
// percent: a live heap under it counts as 4 MiB, so that the goal stays under the floor.
const minLive = 4 << 20

// PercentFor is the GOGC that lets a heap of live bytes grow to floor bytes before
// its next collection, and never less than Go's own pace.
func PercentFor(live, floor uint64) int {
	live = max(live, minLive)
	if floor <= 2*live {
		return goPercent
	}
	return int((floor - live) * 100 / live)
}

// Run sets the collector's percent from the live heap after every collection, until
// ctx ends, when it gives Go's own pace back. Each collection wakes it (cycleHook), so
// a live heap that jumps (a replay, an index load) is paced as Go paces it from the
// collection that finds it; interval is a fallback should a wake-up be missed.
func Run(ctx context.Context, floor uint64, interval time.Duration) {
	samples := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/live:bytes"}}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	defer debug.SetGCPercent(goPercent)
	cycled := make(chan struct{}, 1)
	cycleHook(ctx.Done(), cycled)
	cycles, set := uint64(0), -1
	for {
		metrics.Read(samples)
		if c := samples[0].Value.Uint64(); c != cycles || set < 0 {
			cycles = c
			if p := PercentFor(samples[1].Value.Uint64(), floor); p != set {
				debug.SetGCPercent(p)
				set = p
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-cycled:
		}
	}
}

// sentinel holds a pointer so that it is not a tiny allocation, whose finalizer may
// wait for its neighbours in the same block.
type sentinel struct{ _ *byte }

// cycleHook signals cycled after each collection until done closes: a finalizer runs
// once the collector has found its object unreachable, and arms a new one.
func cycleHook(done <-chan struct{}, cycled chan<- struct{}) {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
		select {
		case <-done:
			return
		default:
		}
		select {
		case cycled <- struct{}{}:
		default:
		}
		cycleHook(done, cycled)
	})
}
