package metrics

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

func render(t *testing.T, r *Registry) string {
	t.Helper()
	var sb strings.Builder
	if err := r.WriteText(&sb); err != nil {
		t.Fatalf("WriteText: %v", err)
	}
	return sb.String()
}

func checkText(t *testing.T, r *Registry, want string) {
	t.Helper()
	if got := render(t, r); got != want {
		t.Errorf("exposition mismatch\n--- got ---\n%s--- want ---\n%s", got, want)
	}
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", what)
		}
	}()
	f()
}

func TestCounterText(t *testing.T) {
	r := NewRegistry()
	plain := r.Counter("loom_events_total", "Events ingested.")
	plain.With().Inc()
	plain.With().Add(2.5)
	reqs := r.Counter("loom_http_requests_total", "HTTP requests.", "method", "code")
	reqs.With("GET", "200").Add(3)
	reqs.With("POST", "500").Inc()
	reqs.With("GET", "404").Inc()
	r.Counter("loom_idle_total", "Registered, never incremented.")

	checkText(t, r, `# HELP loom_events_total Events ingested.
# TYPE loom_events_total counter
loom_events_total 3.5
# HELP loom_http_requests_total HTTP requests.
# TYPE loom_http_requests_total counter
loom_http_requests_total{code="200",method="GET"} 3
loom_http_requests_total{code="404",method="GET"} 1
loom_http_requests_total{code="500",method="POST"} 1
# HELP loom_idle_total Registered, never incremented.
# TYPE loom_idle_total counter
loom_idle_total 0
`)
	if got := reqs.With("GET", "200").Value(); got != 3 {
		t.Errorf("Value = %v, want 3", got)
	}
}

func TestCounterLargeAndFractional(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("c_total", "").With()
	c.Add(1e6)
	c.Add(0.25)
	c.Add(1 << 60) // beyond 2^53: takes the float path
	if got, want := c.Value(), 1e6+0.25+(1<<60); got != want {
		t.Errorf("Value = %v, want %v", got, want)
	}
	c2 := r.Counter("c2_total", "").With()
	c2.Add(1234567)
	c2.Add(math.Inf(1))
	checkText(t, r, `# HELP c2_total 
# TYPE c2_total counter
c2_total +Inf
# HELP c_total 
# TYPE c_total counter
c_total 1.152921504607847e+18
`)
}

func TestCounterNegativePanics(t *testing.T) {
	c := NewRegistry().Counter("c_total", "").With()
	mustPanic(t, "Add(-1)", func() { c.Add(-1) })
	mustPanic(t, "Add(NaN)", func() { c.Add(math.NaN()) })
	c.Add(0)
	if c.Value() != 0 {
		t.Errorf("Value = %v after failed adds, want 0", c.Value())
	}
}

func TestGaugeText(t *testing.T) {
	r := NewRegistry()
	g := r.Gauge("loom_workers", "Busy workers.")
	g.With().Set(4)
	g.With().Add(-1.5)
	q := r.Gauge("loom_queue_depth", "Depth per queue.", "queue")
	q.With("b").Set(math.NaN())
	q.With("a").Set(math.Inf(-1))
	q.With("c").Set(1e-7)
	q.With("d").Set(-0.001)

	checkText(t, r, `# HELP loom_queue_depth Depth per queue.
# TYPE loom_queue_depth gauge
loom_queue_depth{queue="a"} -Inf
loom_queue_depth{queue="b"} NaN
loom_queue_depth{queue="c"} 1e-07
loom_queue_depth{queue="d"} -0.001
# HELP loom_workers Busy workers.
# TYPE loom_workers gauge
loom_workers 2.5
`)
	if got := g.With().Value(); got != 2.5 {
		t.Errorf("Value = %v, want 2.5", got)
	}
}

func TestGaugeFuncReadAtScrape(t *testing.T) {
	r := NewRegistry()
	depth := 7.0
	calls := 0
	r.GaugeFunc("loom_outbox_depth", "Unpublished outbox rows.", func() float64 {
		calls++
		return depth
	})
	if calls != 0 {
		t.Fatalf("fn called %d times at registration", calls)
	}
	checkText(t, r, `# HELP loom_outbox_depth Unpublished outbox rows.
# TYPE loom_outbox_depth gauge
loom_outbox_depth 7
`)
	depth = 42
	checkText(t, r, `# HELP loom_outbox_depth Unpublished outbox rows.
# TYPE loom_outbox_depth gauge
loom_outbox_depth 42
`)
	if calls != 2 {
		t.Errorf("fn called %d times, want once per scrape (2)", calls)
	}
	mustPanic(t, "nil fn", func() { r.GaugeFunc("other", "", nil) })
}

func TestGaugeFuncMayUseRegistry(t *testing.T) {
	// The function runs without registry locks, so it can consult other
	// metrics without deadlocking.
	r := NewRegistry()
	c := r.Counter("a_total", "")
	c.With().Add(3)
	r.GaugeFunc("b", "", func() float64 { return c.With().Value() * 2 })
	checkText(t, r, `# HELP a_total 
# TYPE a_total counter
a_total 3
# HELP b 
# TYPE b gauge
b 6
`)
}

func TestHistogramText(t *testing.T) {
	r := NewRegistry()
	h := r.Histogram("loom_req_seconds", "Request latency.", []float64{0.1, 0.5, 1}, "route")
	q := h.With("/query")
	q.Observe(0.05)
	q.Observe(0.1) // on a bound: le is inclusive, so it counts in le="0.1"
	q.Observe(0.3)
	q.Observe(1)
	q.Observe(7) // only +Inf
	h.With("/ingest").Observe(0.5)

	checkText(t, r, `# HELP loom_req_seconds Request latency.
# TYPE loom_req_seconds histogram
loom_req_seconds_bucket{route="/ingest",le="0.1"} 0
loom_req_seconds_bucket{route="/ingest",le="0.5"} 1
loom_req_seconds_bucket{route="/ingest",le="1"} 1
loom_req_seconds_bucket{route="/ingest",le="+Inf"} 1
loom_req_seconds_sum{route="/ingest"} 0.5
loom_req_seconds_count{route="/ingest"} 1
loom_req_seconds_bucket{route="/query",le="0.1"} 2
loom_req_seconds_bucket{route="/query",le="0.5"} 3
loom_req_seconds_bucket{route="/query",le="1"} 4
loom_req_seconds_bucket{route="/query",le="+Inf"} 5
loom_req_seconds_sum{route="/query"} 8.45
loom_req_seconds_count{route="/query"} 5
`)
}

func TestHistogramUnlabelledAndDefaultBuckets(t *testing.T) {
	r := NewRegistry()
	h := r.Histogram("d_seconds", "Default buckets.", nil)
	h.With().Observe(0.0025)
	h.With().Observe(math.NaN()) // Prometheus client behaviour: +Inf only, sum NaN
	checkText(t, r, `# HELP d_seconds Default buckets.
# TYPE d_seconds histogram
d_seconds_bucket{le="0.001"} 0
d_seconds_bucket{le="0.0025"} 1
d_seconds_bucket{le="0.005"} 1
d_seconds_bucket{le="0.01"} 1
d_seconds_bucket{le="0.025"} 1
d_seconds_bucket{le="0.05"} 1
d_seconds_bucket{le="0.1"} 1
d_seconds_bucket{le="0.25"} 1
d_seconds_bucket{le="0.5"} 1
d_seconds_bucket{le="1"} 1
d_seconds_bucket{le="2.5"} 1
d_seconds_bucket{le="5"} 1
d_seconds_bucket{le="10"} 1
d_seconds_bucket{le="+Inf"} 2
d_seconds_sum NaN
d_seconds_count 2
`)
}

func TestHistogramBuckets(t *testing.T) {
	r := NewRegistry()
	b := []float64{1, 2, math.Inf(1)} // trailing +Inf is implicit anyway
	h := r.Histogram("h", "", b).With()
	b[0] = 100 // the histogram keeps its own copy
	h.Observe(1)
	h.Observe(math.Inf(1))
	h.Observe(-3)
	checkText(t, r, `# HELP h 
# TYPE h histogram
h_bucket{le="1"} 2
h_bucket{le="2"} 2
h_bucket{le="+Inf"} 3
h_sum +Inf
h_count 3
`)

	empty := r.Histogram("no_bounds", "", []float64{math.Inf(1)}).With()
	empty.Observe(3)
	if !strings.Contains(render(t, r), "no_bounds_bucket{le=\"0.001\"} 0\n") {
		t.Errorf("no bounds: want DefaultBuckets, got\n%s", render(t, r))
	}

	for name, bad := range map[string][]float64{
		"unsorted":  {1, 0.5},
		"duplicate": {1, 1},
		"nan":       {math.NaN()},
		"inf mid":   {1, math.Inf(1), 2},
	} {
		mustPanic(t, "buckets "+name, func() { r.Histogram("bad_"+strings.ReplaceAll(name, " ", "_"), "", bad) })
	}
	mustPanic(t, "le label", func() { r.Histogram("h2", "", nil, "le") })
}

func TestObserveSince(t *testing.T) {
	r := NewRegistry()
	h := r.Histogram("s", "", []float64{1, 3600}).With()
	h.ObserveSince(time.Now().Add(-2 * time.Second))
	out := render(t, r)
	if !strings.Contains(out, "s_bucket{le=\"1\"} 0\ns_bucket{le=\"3600\"} 1\n") {
		t.Fatalf("want the observation in le=3600 only, got\n%s", out)
	}
	var sum float64
	if _, err := fmt.Sscanf(out[strings.Index(out, "s_sum ")+len("s_sum "):], "%g", &sum); err != nil || sum < 2 || sum > 60 {
		t.Errorf("sum = %v seconds (%v), want about 2", sum, err)
	}
}

func TestLabelEscaping(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("esc_total", "Help with \\ backslash\nand newline and \"quotes\".", "v")
	c.With(`a\b`).Inc()
	c.With(`say "hi"`).Inc()
	c.With("line1\nline2").Inc()
	c.With("bad\xffutf8").Inc()
	c.With("").Inc()
	checkText(t, r, `# HELP esc_total Help with \\ backslash\nand newline and "quotes".
# TYPE esc_total counter
esc_total{v=""} 1
esc_total{v="a\\b"} 1
esc_total{v="bad`+"\uFFFD"+`utf8"} 1
esc_total{v="line1\nline2"} 1
esc_total{v="say \"hi\""} 1
`)
}

func TestSeriesKeyUnambiguous(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("k_total", "", "a", "b")
	c.With("x\xff", "y").Inc() // invalid UTF-8 is replaced, never confused with the separator
	c.With("x", "\xffy").Inc()
	c.With("x", "y").Inc()
	vals := []string{"p", "q"}
	c.With(vals...).Inc()
	vals[0] = "mutated" // the registry must not alias the caller's slice
	checkText(t, r, `# HELP k_total 
# TYPE k_total counter
k_total{a="p",b="q"} 1
k_total{a="x",b="y"} 1
k_total{a="x",b="`+"\uFFFD"+`y"} 1
k_total{a="x`+"\uFFFD"+`",b="y"} 1
`)
}

func TestSortedOutput(t *testing.T) {
	r := NewRegistry()
	// Registered out of order; output is by family name, then by label
	// values in label name order, label pairs by name (as the client sorts).
	z := r.Gauge("zeta", "", "b", "a")
	r.Counter("alpha_total", "").With().Inc()
	r.GaugeFunc("mid", "", func() float64 { return 1 })
	z.With("2", "1").Set(1)
	z.With("1", "9").Set(2)
	z.With("1", "10").Set(3)
	z.With("10", "0").Set(4)
	checkText(t, r, `# HELP alpha_total 
# TYPE alpha_total counter
alpha_total 1
# HELP mid 
# TYPE mid gauge
mid 1
# HELP zeta 
# TYPE zeta gauge
zeta{a="0",b="10"} 4
zeta{a="1",b="2"} 1
zeta{a="10",b="1"} 3
zeta{a="9",b="1"} 2
`)
}

func TestEmptyLabelledFamilyOmitted(t *testing.T) {
	r := NewRegistry()
	r.Counter("unused_total", "No series yet.", "x")
	r.Histogram("unused_seconds", "No series yet.", nil, "x")
	if got := render(t, r); got != "" {
		t.Errorf("want empty output, got\n%s", got)
	}
}

func TestDuplicateRegistrationPanics(t *testing.T) {
	r := NewRegistry()
	r.Counter("dup", "")
	r.Histogram("lat", "", nil)
	r.Counter("req_sum", "")
	cases := map[string]func(){
		"same counter":          func() { r.Counter("dup", "") },
		"gauge over counter":    func() { r.Gauge("dup", "") },
		"gauge func":            func() { r.GaugeFunc("dup", "", func() float64 { return 0 }) },
		"histogram":             func() { r.Histogram("dup", "", nil) },
		"histogram sample":      func() { r.Counter("lat_count", "") },
		"histogram sample 2":    func() { r.Gauge("lat_bucket", "") },
		"histogram over sample": func() { r.Histogram("req", "", nil) },
	}
	for name, f := range cases {
		mustPanic(t, name, f)
	}
}

func TestWrongLabelCountPanics(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("c_total", "", "a", "b")
	g := r.Gauge("g", "")
	h := r.Histogram("h", "", nil, "a")
	mustPanic(t, "counter too few", func() { c.With("x") })
	mustPanic(t, "counter too many", func() { c.With("x", "y", "z") })
	mustPanic(t, "gauge extra", func() { g.With("x") })
	mustPanic(t, "histogram none", func() { h.With() })
}

func TestInvalidNamesPanic(t *testing.T) {
	for _, name := range []string{"", "1abc", "a-b", "a b", "é", "a.b"} {
		mustPanic(t, "metric name "+name, func() { NewRegistry().Counter(name, "") })
	}
	for _, l := range []string{"", "1a", "a:b", "a-b", "__reserved", "é"} {
		mustPanic(t, "label name "+l, func() { NewRegistry().Gauge("g", "", l) })
	}
	mustPanic(t, "duplicate label", func() { NewRegistry().Gauge("g", "", "a", "a") })
	// Valid edge cases must not panic.
	r := NewRegistry()
	r.Counter(":a:b_1", "", "_x", "A9")
	r.Gauge("_", "", "_")
}

func TestConcurrentInc(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("hits_total", "", "shard")
	g := r.Gauge("level", "")
	h := r.Histogram("lat", "", []float64{0.5})
	const workers, perWorker = 64, 2000
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			shard := []string{"a", "b"}[i%2]
			for range perWorker {
				c.With(shard).Inc()
				c.With("all").Inc()
				c.With("frac").Add(0.5)
				g.With().Add(1)
				h.With().Observe(0.25)
			}
		}()
	}
	// Scrape while writers run, for the race detector.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20 {
			_ = r.WriteText(io.Discard)
		}
	}()
	wg.Wait()
	<-done

	const total = workers * perWorker
	if got := c.With("all").Value(); got != total {
		t.Errorf("all = %v, want %d", got, total)
	}
	if got := c.With("a").Value() + c.With("b").Value(); got != total {
		t.Errorf("a+b = %v, want %d", got, total)
	}
	if got := c.With("frac").Value(); got != total/2 {
		t.Errorf("frac = %v, want %d", got, total/2)
	}
	if got := g.With().Value(); got != total {
		t.Errorf("gauge = %v, want %d", got, total)
	}
	out := render(t, r)
	for _, line := range []string{
		`lat_bucket{le="0.5"} 128000`,
		`lat_bucket{le="+Inf"} 128000`,
		`lat_sum 32000`,
		`lat_count 128000`,
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("missing %q in\n%s", line, out)
		}
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("boom") }

func TestWriteTextError(t *testing.T) {
	r := NewRegistry()
	r.Counter("a_total", "")
	if err := r.WriteText(failWriter{}); err == nil || err.Error() != "boom" {
		t.Errorf("err = %v, want boom", err)
	}
}

func TestContentType(t *testing.T) {
	if ContentType != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("ContentType = %q", ContentType)
	}
}

func TestWithExistingSeriesDoesNotAllocate(t *testing.T) {
	// Hot request paths call With per request; the lookup of an existing
	// series should cost no garbage for up to one label.
	r := NewRegistry()
	c := r.Counter("c_total", "", "route")
	h := r.Histogram("h", "", nil, "route")
	c.With("/q").Inc()
	h.With("/q").Observe(1)
	if n := testing.AllocsPerRun(100, func() {
		c.With("/q").Inc()
		h.With("/q").Observe(0.2)
	}); n != 0 {
		t.Errorf("allocs per With+Inc+Observe = %v, want 0", n)
	}
}
