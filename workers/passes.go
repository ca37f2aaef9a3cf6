package workers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/loomplane/loom/internal/metrics"
)

// The passes' account (memory-architecture, "Background passes"): for each pass this
// process runs, when its last pass ended, the rows it finished and the failures it
// met, in /metrics and in the operator's /v1/health; the rows owed are read from
// loom.worker_items at the end of each pass, so every process's answer is the
// deployment's queue.

// passStats is a pass's account in this process.
type passStats struct {
	mu       sync.Mutex
	lastRun  time.Time
	done     int64
	failures int64
	owed     int64
	counted  time.Time // when owed was counted
}

// errNotCounted stands for a count the pass skipped (nothing taken, counted lately).
var errNotCounted = errors.New("not counted")

// PassHealth is what /v1/health's `passes` shows of a pass: this process's account of
// it (enabled here, its last run, rows done and failures here, and the rows the
// deployment owes it as its last pass read them) and, with include=workers, its queue
// as the deployment's loom.worker_items holds it (WithQueues).
type PassHealth struct {
	Enabled  bool         `json:"enabled"`
	LastRun  *time.Time   `json:"last_run,omitempty"`
	RowsDone int64        `json:"rows_done"`
	RowsOwed int64        `json:"rows_owed"`
	Failures int64        `json:"failures"`
	Queue    *QueueHealth `json:"queue,omitempty"`
}

// WithQueues is one view of the passes: each pass's account in this process (passes;
// nil: this process runs no workers role, so every pass is off here) with its queue
// from queues joined in as `queue`.
func WithQueues(passes map[string]PassHealth, queues map[string]QueueHealth) map[string]PassHealth {
	out := map[string]PassHealth{}
	for _, w := range Names() {
		h, ok := passes[w]
		if !ok && queues == nil {
			continue
		}
		if q, ok := queues[w]; ok && Fed(w) {
			h.Queue = &q
		}
		out[w] = h
	}
	return out
}

// passMetrics are the passes' series.
type passMetrics struct {
	done, failures *metrics.CounterVec
	lastRun, owed  *metrics.GaugeVec
}

func newPassMetrics(reg *metrics.Registry) passMetrics {
	m := passMetrics{
		done:     reg.Counter("loom_worker_pass_rows_total", "Rows a background pass finished (stamped done), by pass.", "worker"),
		failures: reg.Counter("loom_worker_pass_failures_total", "Rows a background pass failed on and left owed, by pass.", "worker"),
		lastRun:  reg.Gauge("loom_worker_pass_last_run_timestamp_seconds", "When a background pass of this process last ended (Unix seconds), by pass.", "worker"),
		owed:     reg.Gauge("loom_worker_pass_rows_owed", "Rows a background pass owes (loom.worker_items owed), read at the end of its last pass, by pass.", "worker"),
	}
	// Every pass's series exist from the start (0: nothing done, never run here), so a
	// dashboard reads them whatever this process runs.
	for _, w := range Names() {
		m.done.With(w).Add(0)
		m.failures.With(w).Add(0)
		m.lastRun.With(w).Set(0)
		m.owed.With(w).Set(0)
	}
	return m
}

// account records a pass's end: its result, and the queue it leaves, counted again
// when the pass took something or the count is owedRecount old.
func (s *Service) account(ctx context.Context, worker string, r passResult) {
	st := s.stats[worker]
	if st == nil {
		return
	}
	st.mu.Lock()
	recount := r.claimed > 0 || r.done > 0 || r.errors > 0 || time.Since(st.counted) >= owedRecount
	st.mu.Unlock()
	var owed int64
	err := errNotCounted
	if recount {
		if owed, err = s.owedCount(ctx, worker); err != nil && ctx.Err() == nil {
			s.log.Warn("worker: counting the owed rows failed", "worker", worker, "err", err)
		}
	}
	st.mu.Lock()
	st.lastRun = s.now()
	st.done += int64(r.done)
	st.failures += int64(r.errors)
	if err == nil {
		st.owed, st.counted = owed, time.Now()
	}
	owed = st.owed
	st.mu.Unlock()
	s.passMetrics.done.With(worker).Add(float64(r.done))
	s.passMetrics.failures.With(worker).Add(float64(r.errors))
	s.passMetrics.lastRun.With(worker).Set(float64(s.now().Unix()))
	s.passMetrics.owed.With(worker).Set(float64(owed))
}

// owedCount counts the rows a worker owes.
func (s *Service) owedCount(ctx context.Context, worker string) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM loom.worker_items WHERE worker = $1 AND state = 'owed'`, worker).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the %s's owed rows: %w", worker, err)
	}
	return n, nil
}

// Health is each worker's account in this process, for /v1/health.
func (s *Service) Health() map[string]PassHealth {
	out := map[string]PassHealth{}
	for _, w := range Names() {
		h := PassHealth{Enabled: s.Enabled(w)}
		if st := s.stats[w]; st != nil {
			st.mu.Lock()
			if !st.lastRun.IsZero() {
				t := st.lastRun
				h.LastRun = &t
			}
			h.RowsDone, h.RowsOwed, h.Failures = st.done, st.owed, st.failures
			st.mu.Unlock()
		}
		out[w] = h
	}
	return out
}
