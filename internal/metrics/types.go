package metrics

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// DefaultBuckets are the histogram bounds used when none are given: request
// latencies in seconds from 1ms to 10s (the client's own start at 5ms; these
// keep the buckets Loom has always exported).
var DefaultBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// CounterVec is a counter family; With selects one series.
type CounterVec struct{ v *vec[Counter] }

// With returns the counter for the given label values, in the order the
// labels were registered. Callers on hot paths may keep the result.
func (v *CounterVec) With(labelValues ...string) *Counter { return v.v.with(labelValues) }

// Counter is a value that only goes up.
type Counter struct{ c prometheus.Counter }

// Inc adds 1.
func (c *Counter) Inc() { c.c.Inc() }

// Add adds n, which must not be negative (or NaN): a counter that goes down
// would be read by Prometheus as a reset.
func (c *Counter) Add(n float64) {
	if !(n >= 0) {
		panic(fmt.Sprintf("metrics: counter decreased by %v", -n))
	}
	c.c.Add(n)
}

// Value returns the current total.
func (c *Counter) Value() float64 { return read(c.c).GetCounter().GetValue() }

// GaugeVec is a gauge family; With selects one series.
type GaugeVec struct{ v *vec[Gauge] }

// With returns the gauge for the given label values, in the order the labels
// were registered.
func (v *GaugeVec) With(labelValues ...string) *Gauge { return v.v.with(labelValues) }

// Gauge is a value that can go up and down.
type Gauge struct{ g prometheus.Gauge }

// Set sets the gauge to v.
func (g *Gauge) Set(v float64) { g.g.Set(v) }

// Add adds v, which may be negative.
func (g *Gauge) Add(v float64) { g.g.Add(v) }

// Value returns the current value.
func (g *Gauge) Value() float64 { return read(g.g).GetGauge().GetValue() }

// HistogramVec is a histogram family; With selects one series.
type HistogramVec struct{ v *vec[Histogram] }

// With returns the histogram for the given label values, in the order the
// labels were registered.
func (v *HistogramVec) With(labelValues ...string) *Histogram { return v.v.with(labelValues) }

// Histogram counts observations into buckets.
type Histogram struct{ h prometheus.Observer }

// Observe records v. Bounds are inclusive: v equal to a bound counts in that
// bound's bucket. NaN lands only in +Inf.
func (h *Histogram) Observe(v float64) { h.h.Observe(v) }

// ObserveSince records the seconds elapsed since start.
func (h *Histogram) ObserveSince(start time.Time) { h.h.Observe(time.Since(start).Seconds()) }

// read reads a series' current sample, for Value.
func read(m prometheus.Metric) *dto.Metric {
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		panic(fmt.Sprintf("metrics: read %s: %v", m.Desc(), err))
	}
	return &out
}

// checkBuckets validates bucket bounds and returns a private copy, so that
// later changes to the caller's slice (or to DefaultBuckets) cannot corrupt
// the histogram.
func checkBuckets(name string, buckets []float64) []float64 {
	if len(buckets) == 0 {
		buckets = DefaultBuckets
	}
	b := slices.Clone(buckets)
	if n := len(b); n > 0 && math.IsInf(b[n-1], +1) {
		b = b[:n-1]
	}
	if len(b) == 0 {
		// The client reads no bounds as its own defaults: say so with ours.
		b = slices.Clone(DefaultBuckets)
	}
	for i, ub := range b {
		if math.IsNaN(ub) || math.IsInf(ub, +1) || (i > 0 && !(b[i-1] < ub)) {
			panic(fmt.Sprintf("metrics: histogram %q: buckets must be strictly ascending, got %v", name, buckets))
		}
	}
	return b
}
