// Package metrics is a small metrics registry that renders the Prometheus
// text exposition format (version 0.0.4). It exists because the service may
// not depend on the Prometheus client library; it covers only what Loom
// needs: counters, gauges, gauge functions and histograms, each optionally
// labelled.
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
	"cmp"
	"fmt"
	"io"
	"slices"
	"sync"
)

// ContentType is the Content-Type of the text WriteText renders.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Registry holds metric families and renders them for a scrape. It is safe
// for concurrent use.
type Registry struct {
	mu       sync.Mutex
	families map[string]*family
	// claimed maps every sample name a family emits (a histogram emits
	// name_bucket, name_sum and name_count) to the family that owns it, so
	// that two families can never produce the same series name.
	claimed map[string]string
}

// family is one registered metric: its header and a function that appends
// its samples. The function reads the metric's current values, so a scrape
// always sees live data.
type family struct {
	name, help, typ string
	write           func(b *bytes.Buffer)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{
		families: make(map[string]*family),
		claimed:  make(map[string]string),
	}
}

// Counter registers a counter family with the given label names. A counter
// without labels is created at once, so it is exported as 0 before its
// first increment rather than missing.
func (r *Registry) Counter(name, help string, labels ...string) *CounterVec {
	v := newVec(name, labels, newCounter)
	r.register(name, help, "counter", labels, nil, func(b *bytes.Buffer) {
		for _, s := range v.snapshot() {
			writeSample(b, name, v.labels, s.values, "", s.m.Value())
		}
	})
	return &CounterVec{v: v}
}

// Gauge registers a gauge family with the given label names. Like Counter,
// an unlabelled gauge is exported from the start.
func (r *Registry) Gauge(name, help string, labels ...string) *GaugeVec {
	v := newVec(name, labels, newGauge)
	r.register(name, help, "gauge", labels, nil, func(b *bytes.Buffer) {
		for _, s := range v.snapshot() {
			writeSample(b, name, v.labels, s.values, "", s.m.Value())
		}
	})
	return &GaugeVec{v: v}
}

// GaugeFunc registers an unlabelled gauge whose value is fn's result at
// scrape time, for values that live elsewhere (such as a queue depth held in
// Postgres). fn is called without any registry lock held, so it may be slow
// or call back into the registry, but it runs on every scrape.
func (r *Registry) GaugeFunc(name, help string, fn func() float64) {
	if fn == nil {
		panic(fmt.Sprintf("metrics: GaugeFunc %q: nil function", name))
	}
	r.register(name, help, "gauge", nil, nil, func(b *bytes.Buffer) {
		writeSample(b, name, nil, nil, "", fn())
	})
}

// Histogram registers a histogram family. buckets are the inclusive upper
// bounds, strictly ascending; the +Inf bucket is implicit (a trailing +Inf
// is accepted and dropped). nil buckets mean DefaultBuckets. The label name
// "le" is reserved for the bucket bound.
func (r *Registry) Histogram(name, help string, buckets []float64, labels ...string) *HistogramVec {
	bounds := checkBuckets(name, buckets)
	les := make([]string, len(bounds)+1)
	for i, ub := range bounds {
		les[i] = formatFloat(ub)
	}
	les[len(bounds)] = "+Inf"
	if slices.Contains(labels, "le") {
		panic(fmt.Sprintf("metrics: histogram %q: label name \"le\" is reserved", name))
	}
	v := newVec(name, labels, func() *Histogram { return newHistogram(bounds) })
	suffixes := []string{name + "_bucket", name + "_sum", name + "_count"}
	r.register(name, help, "histogram", labels, suffixes, func(b *bytes.Buffer) {
		for _, s := range v.snapshot() {
			s.m.write(b, name, v.labels, s.values, les)
		}
	})
	return &HistogramVec{v: v}
}

// register validates the names and adds the family, panicking if it or any
// sample name it emits is already taken.
func (r *Registry) register(name, help, typ string, labels, extra []string, write func(*bytes.Buffer)) {
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
	r.families[name] = &family{name: name, help: help, typ: typ, write: write}
}

// WriteText renders every family in the text exposition format: families
// sorted by name, series sorted by label values. Families with labels but no
// series yet are left out, as the Prometheus client does. The whole output
// is built before anything is written, so w sees either a complete scrape or
// nothing.
func (r *Registry) WriteText(w io.Writer) error {
	// Copy the family list and release the lock before rendering: gauge
	// functions may be slow and must not block registration or each other.
	r.mu.Lock()
	fams := make([]*family, 0, len(r.families))
	for _, f := range r.families {
		fams = append(fams, f)
	}
	r.mu.Unlock()
	slices.SortFunc(fams, func(a, b *family) int { return cmp.Compare(a.name, b.name) })

	var buf, samples bytes.Buffer
	for _, f := range fams {
		samples.Reset()
		f.write(&samples)
		if samples.Len() == 0 {
			continue
		}
		if f.help != "" {
			buf.WriteString("# HELP ")
			buf.WriteString(f.name)
			buf.WriteByte(' ')
			helpEscaper.WriteString(&buf, f.help)
			buf.WriteByte('\n')
		}
		buf.WriteString("# TYPE ")
		buf.WriteString(f.name)
		buf.WriteByte(' ')
		buf.WriteString(f.typ)
		buf.WriteByte('\n')
		buf.Write(samples.Bytes())
	}
	_, err := w.Write(buf.Bytes())
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
