package bench

import (
	"context"
	"fmt"
	"math"
	"runtime/pprof"
	"slices"
	"sync"
	"time"
)

// Sample is what one measured run saw.
type Sample struct {
	Concurrency int            `json:"concurrency"`
	Calls       int            `json:"calls"`  // answered successfully
	Errors      int            `json:"errors"` // answered otherwise
	ErrorKinds  map[string]int `json:"error_kinds,omitempty"`
	Seconds     float64        `json:"seconds"`
	PerSecond   float64        `json:"per_second"` // successful calls per second
	P50MS       float64        `json:"p50_ms"`
	P99MS       float64        `json:"p99_ms"`
	MaxMS       float64        `json:"max_ms"`
}

// maxErrorShare ends a run whose calls mostly fail: past it, the run measures a
// broken setup, not Loom.
const maxErrorShare = 0.5

// closedLoop runs call from conc workers until d has passed: each worker issues its
// next call as soon as its last one is answered, so the rate is what the server
// sustains at that concurrency. i numbers the calls across workers.
func (r *runner) closedLoop(ctx context.Context, label string, conc int, d time.Duration, call func(ctx context.Context, worker, i int) error) (Sample, error) {
	if conc < 1 {
		conc = 1
	}
	r.progress("  %s, concurrency %d, %s", label, conc, d)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu        sync.Mutex
		latencies []time.Duration
		kinds     = map[string]int{}
		errCount  int
		fatal     error
		next      int
	)
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The load's own CPU shows apart from the process's roles in a profile.
			pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("role", "bench client")))
			for time.Now().Before(deadline) && ctx.Err() == nil {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				t0 := time.Now()
				err := call(ctx, w, i)
				took := time.Since(t0)
				mu.Lock()
				// An error answer is counted by kind, and the run goes on (an overloaded
				// server's answers are data); a call that got no answer ends the run.
				kind, _, answered := callKind(err)
				switch {
				case err == nil:
					latencies = append(latencies, took)
				case answered:
					errCount++
					kinds[kind]++
					if errCount > 20 && float64(errCount) > maxErrorShare*float64(errCount+len(latencies)) {
						fatal = fmt.Errorf("%s: %d of %d calls failed (%v)", label, errCount, errCount+len(latencies), kinds)
						cancel()
					}
				default:
					if fatal == nil && ctx.Err() == nil {
						fatal = fmt.Errorf("%s: %w", label, err)
					}
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	stopTicker := r.tick(label, func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("%d calls", len(latencies)+errCount)
	})
	wg.Wait()
	stopTicker()
	elapsed := time.Since(start)
	if fatal != nil {
		return Sample{}, fatal
	}
	if err := ctx.Err(); err != nil {
		return Sample{}, fmt.Errorf("%s: %w", label, err)
	}
	s := summarize(latencies, elapsed)
	s.Concurrency, s.Errors = conc, errCount
	if errCount > 0 {
		s.ErrorKinds = kinds
	}
	r.progress("    %d calls, p50 %.2f ms, p99 %.2f ms, %.1f/s%s", s.Calls, s.P50MS, s.P99MS, s.PerSecond, errorNote(s))
	return s, nil
}

func errorNote(s Sample) string {
	if s.Errors == 0 {
		return ""
	}
	return fmt.Sprintf(", %d errors %v", s.Errors, s.ErrorKinds)
}

// tick says how far a long step has come every 5 seconds until stop is called.
func (r *runner) tick(label string, status func() string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				r.progress("    %s: %s, %s", label, status(), time.Since(start).Round(time.Second))
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// summarize turns the latencies of successful calls over elapsed into a Sample.
func summarize(latencies []time.Duration, elapsed time.Duration) Sample {
	s := Sample{Calls: len(latencies), Seconds: round(elapsed.Seconds(), 2)}
	if elapsed > 0 {
		s.PerSecond = round(float64(len(latencies))/elapsed.Seconds(), 1)
	}
	if len(latencies) == 0 {
		return s
	}
	sorted := slices.Clone(latencies)
	slices.Sort(sorted)
	s.P50MS = ms(percentile(sorted, 0.50))
	s.P99MS = ms(percentile(sorted, 0.99))
	s.MaxMS = ms(sorted[len(sorted)-1])
	return s
}

// percentile is the nearest-rank percentile of sorted values: the smallest value
// at or above which a share p of the values lie. p99 of fewer than 100 values is the
// largest.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(rank, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 2) }

func round(v float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(v*p) / p
}
