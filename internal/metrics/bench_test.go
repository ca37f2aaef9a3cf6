package metrics

import "testing"

// The hot paths call sites take: a kept series' Inc or Observe, and With on a
// labelled family then Inc or Observe (per request).

func BenchmarkCounterInc(b *testing.B) {
	c := NewRegistry().Counter("c_total", "").With()
	for b.Loop() {
		c.Inc()
	}
}

func BenchmarkCounterWithInc(b *testing.B) {
	c := NewRegistry().Counter("c_total", "", "route", "code")
	for b.Loop() {
		c.With("/v1/memories", "200").Inc()
	}
}

func BenchmarkHistogramObserve(b *testing.B) {
	h := NewRegistry().Histogram("h_seconds", "", nil).With()
	for b.Loop() {
		h.Observe(0.042)
	}
}

func BenchmarkHistogramWithObserve(b *testing.B) {
	h := NewRegistry().Histogram("h_seconds", "", nil, "op")
	for b.Loop() {
		h.With("memory.set").Observe(0.042)
	}
}

func BenchmarkHistogramObserveParallel(b *testing.B) {
	h := NewRegistry().Histogram("h_seconds", "", nil).With()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h.Observe(0.042)
		}
	})
}
