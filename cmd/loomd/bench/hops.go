package bench

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Hops records the spans a write leaves on its way from its commit to the search
// index (the commit, the relay's produce, the index follower's processing of the
// record), while it is on: the lag scenario splits commit→index into its hops with
// them. It is the span processor of a tracing.Recording provider whose sampler is On.
type Hops struct {
	on     atomic.Bool
	mu     sync.Mutex
	traces map[trace.TraceID]*hopTimes
}

// hopTimes are one write's marks, zero where a span was not seen.
type hopTimes struct {
	committed        time.Time // the commit span ended
	produced, acked  time.Time // the relay's produce span
	fetched, applied time.Time // the index follower's process span
	seenCommit       bool
}

// NewHops returns a recorder, off.
func NewHops() *Hops { return &Hops{traces: map[trace.TraceID]*hopTimes{}} }

// On reports whether new traces are sampled.
func (h *Hops) On() bool { return h != nil && h.on.Load() }

func (h *Hops) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (h *Hops) Shutdown(context.Context) error                  { return nil }
func (h *Hops) ForceFlush(context.Context) error                { return nil }

// OnEnd keeps the marks of the spans a write's hops are read from.
func (h *Hops) OnEnd(s sdktrace.ReadOnlySpan) {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := s.SpanContext().TraceID()
	t := h.traces[id]
	if t == nil {
		t = &hopTimes{}
		h.traces[id] = t
	}
	switch {
	case s.Name() == "loom.commit":
		t.committed, t.seenCommit = s.EndTime(), true
	case s.SpanKind() == trace.SpanKindProducer:
		t.produced, t.acked = s.StartTime(), s.EndTime()
	case s.SpanKind() == trace.SpanKindConsumer && consumerOf(s) == "index":
		t.fetched, t.applied = s.StartTime(), s.EndTime()
	}
}

func consumerOf(s sdktrace.ReadOnlySpan) string {
	for _, a := range s.Attributes() {
		if a.Key == "loom.consumer" {
			return a.Value.AsString()
		}
	}
	return ""
}

// start clears what was recorded and samples new traces until stop.
func (h *Hops) start() {
	h.mu.Lock()
	h.traces = map[trace.TraceID]*hopTimes{}
	h.mu.Unlock()
	h.on.Store(true)
}

// stop ends the sampling and returns the writes whose every hop was seen.
func (h *Hops) stop() []hopTimes {
	h.on.Store(false)
	time.Sleep(100 * time.Millisecond) // the last apply's spans end just after its waiter wakes
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []hopTimes
	for _, t := range h.traces {
		if t.seenCommit && !t.acked.IsZero() && !t.applied.IsZero() {
			out = append(out, *t)
		}
	}
	return out
}

// hopSplit is commit→index split into its hops, one duration a write each.
type hopSplit struct {
	names []string
	of    [][]time.Duration // by hop, one per write
	total []time.Duration
}

// The hops of commit→index, in order; produced→fetched overlaps the produce's ack.
var hopNames = []string{
	"commit→relay produces (wake, read, seal)",
	"produce→acked",
	"produce→index fetched",
	"fetched→applied (keys, open, apply)",
}

func splitHops(ws []hopTimes) hopSplit {
	s := hopSplit{names: hopNames, of: make([][]time.Duration, len(hopNames))}
	for _, w := range ws {
		for i, d := range []time.Duration{w.produced.Sub(w.committed), w.acked.Sub(w.produced),
			w.fetched.Sub(w.produced), w.applied.Sub(w.fetched)} {
			s.of[i] = append(s.of[i], d)
		}
		s.total = append(s.total, w.applied.Sub(w.committed))
	}
	return s
}

// slowest returns, for each hop, its mean over the slowest share 1-q of the writes
// (at least one) by commit→index: where the tail's time goes.
func (s hopSplit) slowest(q float64) (means []time.Duration, n int) {
	if len(s.total) == 0 {
		return nil, 0
	}
	order := make([]int, len(s.total))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(s.total[b], s.total[a]) })
	n = max(1, int(math.Ceil(float64(len(order))*(1-q)-1e-9)))
	means = make([]time.Duration, len(s.names))
	for _, w := range order[:n] {
		for i := range s.names {
			means[i] += s.of[i][w]
		}
	}
	for i := range means {
		means[i] /= time.Duration(n)
	}
	return means, n
}

// lagHops writes and waits for the index as lagIndexAlone does, with the writes
// traced, and adds each hop's p50 and p99 and its mean in the slowest tenth.
func (r *runner) lagHops(ctx context.Context, res *ScenarioResult, ns, name string, conc int) error {
	h, index := r.t.Hops, r.t.Process.Index()
	if h == nil || index == nil {
		return nil
	}
	h.start()
	_, err := r.closedLoop(ctx, "write until indexed, traced "+name, conc, r.opts.Duration, func(ctx context.Context, _, i int) error {
		_, err := r.indexSample(ctx, ns, index, 1_000_000+i)
		return err
	})
	ws := h.stop()
	if err != nil {
		return err
	}
	if len(ws) == 0 {
		// The process did not publish them or index them itself (the relay lock is
		// held by another process): no write's hops were all seen.
		res.Notes = append(res.Notes, name+": no traced write's hops were all seen in this process (is its relay the one publishing?)")
		return nil
	}
	s := splitHops(ws)
	tail, n := s.slowest(0.9)
	for i, hop := range s.names {
		sum := summarize(s.of[i], 0)
		res.Rows = append(res.Rows,
			Row{Case: name + ", hop " + hop, Metric: "p50 ms", Loom: sum.P50MS},
			Row{Case: name + ", hop " + hop, Metric: "p99 ms", Loom: sum.P99MS},
			Row{Case: name + ", hop " + hop, Metric: "mean ms, slowest tenth", Loom: ms(tail[i])})
	}
	total := summarize(s.total, 0)
	res.Rows = append(res.Rows,
		Row{Case: name + ", traced commit→applied", Metric: "p50 ms", Loom: total.P50MS},
		Row{Case: name + ", traced commit→applied", Metric: "p99 ms", Loom: total.P99MS})
	res.Notes = append(res.Notes, fmt.Sprintf("%s: %d traced writes split into hops (the slowest tenth: %d), from their spans: "+
		"the commit's end, the relay's produce (start, ack), the index follower's processing (its poll, its apply)", name, len(ws), n))
	return nil
}
