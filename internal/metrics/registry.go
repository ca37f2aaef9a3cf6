// Package metrics is Loom's metrics registry over the Prometheus client library
// (github.com/prometheus/client_golang): counters, gauges, gauge functions and
// histograms, each optionally labelled, rendered in the Prometheus text exposition
// format (version 0.0.4). Call sites keep a small API of their own (With returns a
// series they may keep; no client type leaks into a role), while the samples, their
// exposition and the Go runtime and process collectors are the client's.
//
// There is no default registry: callers construct one with NewRegistry and
// pass it around, so tests and embedded servers never share state.
//
// Registration mistakes (bad names, duplicates, wrong label counts) panic,
// because they are programming errors that should fail at startup or in the
// first test, not be reported per request.
package metrics

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
)

// ContentType is the Content-Type of the text WriteText renders.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Registry holds metric families and renders them for a scrape. It is safe
// for concurrent use.
type Registry struct {
	prom *prometheus.Registry

	mu sync.Mutex
	// claimed maps every sample name a family emits (a histogram emits
	// name_bucket, name_sum and name_count) to the family that owns it, so
	// that two families can never produce the same series name: the client
	// only finds such a clash at scrape time.
	claimed map[string]string
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{prom: prometheus.NewRegistry(), claimed: make(map[string]string)}
}

// RegisterRuntime adds the client's Go runtime collector (go_*: goroutines, GC,
// memory) and process collector (process_*: CPU, resident memory, open file
// descriptors).
func (r *Registry) RegisterRuntime() {
	r.prom.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// Counter registers a counter family with the given label names. A counter
// without labels is created at once, so it is exported as 0 before its
// first increment rather than missing.
func (r *Registry) Counter(name, help string, labels ...string) *CounterVec {
	r.claim(name, labels, nil)
	pv := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	r.prom.MustRegister(pv)
	return &CounterVec{v: newVec(name, labels, func(values []string) *Counter {
		return &Counter{c: pv.WithLabelValues(values...)}
	})}
}

// Gauge registers a gauge family with the given label names. Like Counter,
// an unlabelled gauge is exported from the start.
func (r *Registry) Gauge(name, help string, labels ...string) *GaugeVec {
	r.claim(name, labels, nil)
	pv := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	r.prom.MustRegister(pv)
	return &GaugeVec{v: newVec(name, labels, func(values []string) *Gauge {
		return &Gauge{g: pv.WithLabelValues(values...)}
	})}
}

// GaugeFunc registers an unlabelled gauge whose value is fn's result at
// scrape time, for values that live elsewhere (such as a queue depth held in
// Postgres). fn is called without any registry lock held, so it may be slow
// or call back into the registry, but it runs on every scrape.
func (r *Registry) GaugeFunc(name, help string, fn func() float64) {
	if fn == nil {
		panic(fmt.Sprintf("metrics: GaugeFunc %q: nil function", name))
	}
	r.claim(name, nil, nil)
	r.prom.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn))
}

// Histogram registers a histogram family. buckets are the inclusive upper
// bounds, strictly ascending; the +Inf bucket is implicit (a trailing +Inf
// is accepted and dropped). nil or empty buckets mean DefaultBuckets. The
// label name "le" is reserved for the bucket bound.
func (r *Registry) Histogram(name, help string, buckets []float64, labels ...string) *HistogramVec {
	bounds := checkBuckets(name, buckets)
	if slices.Contains(labels, "le") {
		panic(fmt.Sprintf("metrics: histogram %q: label name \"le\" is reserved", name))
	}
	r.claim(name, labels, []string{name + "_bucket", name + "_sum", name + "_count"})
	pv := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: bounds}, labels)
	r.prom.MustRegister(pv)
	return &HistogramVec{v: newVec(name, labels, func(values []string) *Histogram {
		return &Histogram{h: pv.WithLabelValues(values...)}
	})}
}

// claim validates the names and claims name and the sample names in extra,
// panicking if any is taken already. Names are held to the classic
// Prometheus character sets, which every scraper and query language accepts.
func (r *Registry) claim(name string, labels, extra []string) {
	if !validMetricName(name) {
		panic(fmt.Sprintf("metrics: invalid metric name %q", name))
	}
	for i, l := range labels {
		if !validLabelName(l) {
			panic(fmt.Sprintf("metrics: %q: invalid label name %q", name, l))
		}
		if slices.Contains(labels[:i], l) {
			panic(fmt.Sprintf("metrics: %q: duplicate label name %q", name, l))
		}
	}
	names := append([]string{name}, extra...)

	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range names {
		if owner, ok := r.claimed[n]; ok {
			panic(fmt.Sprintf("metrics: %q already registered (by %q)", n, owner))
		}
	}
	for _, n := range names {
		r.claimed[n] = name
	}
}

// WriteText renders every family in the text exposition format, as the
// client gathers them: families sorted by name, series by their labels.
// Families with labels but no series yet are left out. The whole output is
// built before anything is written, so w sees either a complete scrape or
// nothing.
func (r *Registry) WriteText(w io.Writer) error {
	families, err := r.prom.Gather()
	if err != nil {
		return fmt.Errorf("gather metrics: %w", err)
	}
	var buf bytes.Buffer
	for _, f := range families {
		if _, err := expfmt.MetricFamilyToText(&buf, f); err != nil {
			return fmt.Errorf("render metric family %s: %w", f.GetName(), err)
		}
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// validMetricName reports whether s matches ^[a-zA-Z_:][a-zA-Z0-9_:]*$.
func validMetricName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == ':' || isLetter(c) || (i > 0 && isDigit(c))) {
			return false
		}
	}
	return true
}

// validLabelName reports whether s matches ^[a-zA-Z_][a-zA-Z0-9_]*$ and does
// not start with "__", which Prometheus reserves for its own labels.
func validLabelName(s string) bool {
	if s == "" || (len(s) >= 2 && s[:2] == "__") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || isLetter(c) || (i > 0 && isDigit(c))) {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
