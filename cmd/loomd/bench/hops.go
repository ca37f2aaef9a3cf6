package bench

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomplane/loom/internal/indexfeed"
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
	seq              int64     // the write's first seq (the commit span's loom.seq)
	committed        time.Time // the commit span ended
	produced, acked  time.Time // the relay's produce span
	fetched, applied time.Time // the index follower's process span
	keysRead, opened time.Time // its events: the batch's keys read, its content opened
	// answered is when the write's answer reached the bench's client, visible when its
	// wait for the index to reach the seq returned (a search would then find it); zero
	// where the write was not one of the samples.
	answered, visible time.Time
	seenCommit        bool
}

// indexed is one sample of the index: when a write's answer arrived and when the
// index's waiter for its seq woke.
type indexed struct {
	seq               int64
	answered, visible time.Time
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
		for _, a := range s.Attributes() {
			if a.Key == "loom.seq" {
				t.seq = a.Value.AsInt64()
			}
		}
	case s.SpanKind() == trace.SpanKindProducer:
		t.produced, t.acked = s.StartTime(), s.EndTime()
	case s.SpanKind() == trace.SpanKindConsumer && consumerOf(s) == "index":
		t.fetched, t.applied = s.StartTime(), s.EndTime()
		for _, e := range s.Events() {
			switch e.Name {
			case indexfeed.EventKeysRead:
				t.keysRead = e.Time
			case indexfeed.EventOpened:
				t.opened = e.Time
			}
		}
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

// stop ends the sampling and returns the samples whose every hop was seen, each
// joined to its trace by its seq: of the traces committing that seq (other namespaces
// of the process count seqs of their own), the last one to commit before the answer.
func (h *Hops) stop(samples []indexed) []hopTimes {
	h.on.Store(false)
	time.Sleep(100 * time.Millisecond) // the last apply's spans end just after its waiter wakes
	h.mu.Lock()
	defer h.mu.Unlock()
	bySeq := map[int64][]*hopTimes{}
	for _, t := range h.traces {
		if t.seenCommit && !t.acked.IsZero() && !t.applied.IsZero() {
			bySeq[t.seq] = append(bySeq[t.seq], t)
		}
	}
	var out []hopTimes
	for _, s := range samples {
		var best *hopTimes
		for _, t := range bySeq[s.seq] {
			if !t.committed.After(s.answered) && (best == nil || t.committed.After(best.committed)) {
				best = t
			}
		}
		if best != nil {
			w := *best
			w.answered, w.visible = s.answered, s.visible
			out = append(out, w)
		}
	}
	return out
}

// hopSplit is commit→visible split into its hops, one duration a write each.
type hopSplit struct {
	names []string
	of    [][]time.Duration // by hop, one per write
	total []time.Duration   // commit→visible
	// fromAnswer is answer→visible: commit→searchable as the lag scenario's clock reads
	// it (the answer leaves after the commit, while the first hops run).
	fromAnswer []time.Duration
	// acked is produce→acked, beside the hops: the index may fetch a record before its
	// producer hears the ack.
	acked []time.Duration
}

// The hops of commit→visible, in order, one after the other: their sum is the total.
var hopNames = []string{
	"commit→relay produces (wake, read, seal)",
	"produce→index fetched (broker, fetch wait, poll)",
	"fetched→keys read (decode, a Postgres round trip)",
	"keys read→opened (open the content)",
	"opened→applied (hand-off, apply)",
	"applied→visible (the waiter wakes)",
}

func splitHops(ws []hopTimes) hopSplit {
	s := hopSplit{names: hopNames, of: make([][]time.Duration, len(hopNames))}
	for _, w := range ws {
		keysRead, opened := w.keysRead, w.opened
		if keysRead.IsZero() {
			keysRead = w.fetched
		}
		if opened.IsZero() {
			opened = keysRead
		}
		for i, d := range []time.Duration{w.produced.Sub(w.committed), w.fetched.Sub(w.produced),
			keysRead.Sub(w.fetched), opened.Sub(keysRead), w.applied.Sub(opened), w.visible.Sub(w.applied)} {
			s.of[i] = append(s.of[i], d)
		}
		s.total = append(s.total, w.visible.Sub(w.committed))
		s.fromAnswer = append(s.fromAnswer, w.visible.Sub(w.answered))
		s.acked = append(s.acked, w.acked.Sub(w.produced))
	}
	return s
}

// tailWrite is one write over the tail's bound: its hops and the one that took longest.
type tailWrite struct {
	fromAnswer, total time.Duration
	hops              []time.Duration
	longest           int
}

// over returns the writes whose answer→visible exceeded bound, slowest first, and how
// many of them each hop was the longest of.
func (s hopSplit) over(bound time.Duration) (writes []tailWrite, byHop []int) {
	byHop = make([]int, len(s.names))
	for w, d := range s.fromAnswer {
		if d <= bound {
			continue
		}
		t := tailWrite{fromAnswer: d, total: s.total[w]}
		for i := range s.names {
			t.hops = append(t.hops, s.of[i][w])
			if s.of[i][w] > t.hops[t.longest] {
				t.longest = i
			}
		}
		byHop[t.longest]++
		writes = append(writes, t)
	}
	slices.SortStableFunc(writes, func(a, b tailWrite) int { return cmp.Compare(b.fromAnswer, a.fromAnswer) })
	return writes, byHop
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

// lagTailBound is the bound commit→searchable's p99 is held to (issue 35): the traced
// writes past it are classified by the hop that took the longest.
const lagTailBound = 20 * time.Millisecond

// lagHops writes and waits for the index as lagIndexAlone does, with the writes
// traced, and adds each hop's p50 and p99 and its mean in the slowest tenth, and the
// writes over lagTailBound by the hop they spent the longest in.
func (r *runner) lagHops(ctx context.Context, res *ScenarioResult, ns, name string, conc int) error {
	h, index := r.t.Hops, r.t.Process.Index()
	if h == nil || index == nil {
		return nil
	}
	var mu sync.Mutex
	var samples []indexed
	h.start()
	waitBefore := readWait()
	_, err := r.closedLoop(ctx, "write until indexed, traced "+name, conc, r.opts.Duration, func(ctx context.Context, _, i int) error {
		s, err := r.indexSample(ctx, ns, index, 1_000_000+i)
		if err == nil {
			mu.Lock()
			samples = append(samples, s)
			mu.Unlock()
		}
		return err
	})
	waitAfter := readWait()
	ws := h.stop(samples)
	if err != nil {
		return err
	}
	waitRows(res, name+", traced writes", waitBefore, waitAfter, len(samples))
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
	for _, t := range []struct {
		name string
		of   []time.Duration
	}{{"beside the hops: produce→acked", s.acked}, {"traced commit→visible", s.total}, {"traced answer→visible", s.fromAnswer}} {
		sum := summarize(t.of, 0)
		res.Rows = append(res.Rows,
			Row{Case: name + ", " + t.name, Metric: "p50 ms", Loom: sum.P50MS},
			Row{Case: name + ", " + t.name, Metric: "p99 ms", Loom: sum.P99MS})
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%s: %d traced writes of %d split into hops (the slowest tenth: %d), from their spans: "+
		"the commit's end, the relay's produce (start, ack), the index follower's processing (its poll, its apply), "+
		"and the bench's waiter on the index waking", name, len(ws), len(samples), n))
	tailRows(res, name, s)
	return nil
}

// tailRows adds how many traced writes took longer than lagTailBound from their
// answer to visible, by the hop each spent the longest in, and notes the slowest few
// hop by hop: a fixed timer shows as one hop at the same value, load as every hop long.
func tailRows(res *ScenarioResult, name string, s hopSplit) {
	writes, byHop := s.over(lagTailBound)
	over := fmt.Sprintf("%s, traced writes over %d ms (answer→visible)", name, lagTailBound.Milliseconds())
	res.Rows = append(res.Rows, plainRow(over, "writes", float64(len(writes))))
	for i, hop := range s.names {
		res.Rows = append(res.Rows, plainRow(over+", longest hop "+hop, "writes", float64(byHop[i])))
	}
	if len(writes) == 0 {
		return
	}
	note := fmt.Sprintf("%s: the slowest traced writes, answer→visible (commit→visible = %s, ms):", name, strings.Join(s.names, " + "))
	for _, w := range writes[:min(8, len(writes))] {
		parts := make([]string, len(w.hops))
		for i, d := range w.hops {
			parts[i] = strconv.FormatFloat(ms(d), 'f', -1, 64)
		}
		note += fmt.Sprintf(" %.1f (%.1f = %s);", ms(w.fromAnswer), ms(w.total), strings.Join(parts, " + "))
	}
	res.Notes = append(res.Notes, strings.TrimSuffix(note, ";"))
}
