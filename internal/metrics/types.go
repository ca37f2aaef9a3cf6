package metrics

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync/atomic"
	"time"
)

// DefaultBuckets are the histogram bounds used when none are given, the same
// as the Prometheus client's: request latencies in seconds from 1ms to 10s.
var DefaultBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// CounterVec is a counter family; With selects one series.
type CounterVec struct{ v *vec[Counter] }

// With returns the counter for the given label values, in the order the
// labels were registered. Callers on hot paths may keep the result.
func (v *CounterVec) With(labelValues ...string) *Counter { return v.v.with(labelValues) }

// Counter is a value that only goes up.
type Counter struct {
	// Whole-number increments go to n so that Inc is a single atomic add;
	// anything else is added to the float64 bits in f with a CAS loop.
	n atomic.Uint64
	f atomic.Uint64
}

func newCounter() *Counter { return new(Counter) }

// Inc adds 1.
func (c *Counter) Inc() { c.n.Add(1) }

// Add adds n, which must not be negative (or NaN): a counter that goes down
// would be read by Prometheus as a reset.
func (c *Counter) Add(n float64) {
	if !(n >= 0) {
		panic(fmt.Sprintf("metrics: counter decreased by %v", -n))
	}
	// Below 2^53 every whole float64 converts to uint64 exactly.
	if n < 1<<53 && n == math.Trunc(n) {
		c.n.Add(uint64(n))
		return
	}
	addFloat(&c.f, n)
}

// Value returns the current total.
func (c *Counter) Value() float64 {
	return float64(c.n.Load()) + math.Float64frombits(c.f.Load())
}

// GaugeVec is a gauge family; With selects one series.
type GaugeVec struct{ v *vec[Gauge] }

// With returns the gauge for the given label values, in the order the labels
// were registered.
func (v *GaugeVec) With(labelValues ...string) *Gauge { return v.v.with(labelValues) }

// Gauge is a value that can go up and down.
type Gauge struct{ bits atomic.Uint64 }

func newGauge() *Gauge { return new(Gauge) }

// Set sets the gauge to v.
func (g *Gauge) Set(v float64) { g.bits.Store(math.Float64bits(v)) }

// Add adds v, which may be negative.
func (g *Gauge) Add(v float64) { addFloat(&g.bits, v) }

// Value returns the current value.
func (g *Gauge) Value() float64 { return math.Float64frombits(g.bits.Load()) }

// addFloat atomically adds v to the float64 whose bits are in p.
func addFloat(p *atomic.Uint64, v float64) {
	for {
		old := p.Load()
		if p.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// HistogramVec is a histogram family; With selects one series.
type HistogramVec struct{ v *vec[Histogram] }

// With returns the histogram for the given label values, in the order the
// labels were registered.
func (v *HistogramVec) With(labelValues ...string) *Histogram { return v.v.with(labelValues) }

// Histogram counts observations into buckets.
type Histogram struct {
	bounds []float64 // shared by the family; never modified
	// counts[i] counts observations in (bounds[i-1], bounds[i]]; the last
	// element is the +Inf bucket. They are stored per bucket, not
	// cumulatively, so Observe touches a single counter.
	counts []atomic.Uint64
	sum    atomic.Uint64 // float64 bits
}

func newHistogram(bounds []float64) *Histogram {
	return &Histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

// Observe records v. Bounds are inclusive: v equal to a bound counts in that
// bound's bucket. NaN lands only in +Inf, as with the Prometheus client.
func (h *Histogram) Observe(v float64) {
	h.counts[sort.SearchFloat64s(h.bounds, v)].Add(1)
	addFloat(&h.sum, v)
}

// ObserveSince records the seconds elapsed since start.
func (h *Histogram) ObserveSince(start time.Time) { h.Observe(time.Since(start).Seconds()) }

// write appends the series' _bucket, _sum and _count samples. _count is the
// sum of the buckets read here, so it always equals the +Inf bucket even
// while observations race with the scrape; _sum may lag or lead them by the
// observations in flight.
func (h *Histogram) write(b *bytes.Buffer, name string, labels, values, les []string) {
	var cum uint64
	for i := range h.counts {
		cum += h.counts[i].Load()
		writeCount(b, name+"_bucket", labels, values, les[i], cum)
	}
	writeSample(b, name+"_sum", labels, values, "", math.Float64frombits(h.sum.Load()))
	writeCount(b, name+"_count", labels, values, "", cum)
}

// checkBuckets validates bucket bounds and returns a private copy, so that
// later changes to the caller's slice (or to DefaultBuckets) cannot corrupt
// the histogram.
func checkBuckets(name string, buckets []float64) []float64 {
	if buckets == nil {
		buckets = DefaultBuckets
	}
	b := slices.Clone(buckets)
	if n := len(b); n > 0 && math.IsInf(b[n-1], +1) {
		b = b[:n-1]
	}
	for i, ub := range b {
		if math.IsNaN(ub) || math.IsInf(ub, +1) || (i > 0 && !(b[i-1] < ub)) {
			panic(fmt.Sprintf("metrics: histogram %q: buckets must be strictly ascending, got %v", name, buckets))
		}
	}
	return b
}
