package observability

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// notMetrics are loom_ names the docs use for something else.
var notMetrics = map[string]bool{
	"loom_reason":            true, // a mem0 answer's field
	"loom_bench":             true, // the bench's scratch database
	"loom_projection_wanted": true, // a NOTIFY channel (deploy/CONFIG.md)
}

// documentedMetrics are the loom_* names the operator's docs (docs/, README.md,
// deploy/CONFIG.md) name in backticks.
func documentedMetrics(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md", "../../deploy/CONFIG.md")
	re := regexp.MustCompile("`(loom_[a-z_]*[a-z])[`{]")
	seen := map[string]bool{}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			if name := m[1]; !seen[name] && !notMetrics[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("found only %v in the docs: has the docs' layout changed?", out)
	}
	return out
}

// /metrics of a process running every pipeline role parses with Prometheus' own text
// parser, and has every metric the docs name, the Go runtime's and the process's.
func TestMetricsParseAndHaveTheDocumentedMetrics(t *testing.T) {
	n, url, _ := env.Serve(t, []string{"api", "relay", "projector"}, nil)
	tc := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	ns := testenv.Unique(t, "scraped")
	tc.Set(t, ns, "k1", "a memory to count")
	testenv.WaitProjected(t, env.PG(t), n.Cfg.Pipeline.Projection, "acme", ns)

	want := append(documentedMetrics(t), "go_goroutines", "go_memstats_heap_alloc_bytes", "process_cpu_seconds_total",
		"process_resident_memory_bytes", "loom_write_seconds", "loom_relay_published_total", "loom_projector_records_total")
	var missing []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
			t.Fatalf("/metrics answers Content-Type %q", ct)
		}
		parser := expfmt.NewTextParser(model.LegacyValidation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
		if err != nil {
			t.Fatalf("/metrics does not parse as the Prometheus text format: %v\n%s", err, body)
		}
		missing = missing[:0]
		for _, name := range want {
			if f := fams[name]; f == nil || len(f.Metric) == 0 {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(missing) > 0 {
		t.Fatalf("/metrics lacks %v", missing)
	}
}
