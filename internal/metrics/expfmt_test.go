package metrics

import (
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// A scrape parses with Prometheus' own text parser, runtime collectors included,
// and keeps each family's type, help and series.
func TestExpositionParses(t *testing.T) {
	r := NewRegistry()
	r.RegisterRuntime()
	r.Counter("loom_x_total", "Xs, with a \\ and a\nnewline.", "op").With("set\n\"quoted\"").Add(2)
	r.Gauge("loom_g", "A gauge.").With().Set(-1.5)
	r.GaugeFunc("loom_f", "A function.", func() float64 { return 7 })
	r.Histogram("loom_h_seconds", "A histogram.", []float64{0.1, 1}, "op").With("get").Observe(0.5)

	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(render(t, r)))
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	for name, typ := range map[string]dto.MetricType{
		"loom_x_total": dto.MetricType_COUNTER, "loom_g": dto.MetricType_GAUGE, "loom_f": dto.MetricType_GAUGE,
		"loom_h_seconds": dto.MetricType_HISTOGRAM, "go_goroutines": dto.MetricType_GAUGE,
		"go_memstats_heap_alloc_bytes": dto.MetricType_GAUGE, "process_cpu_seconds_total": dto.MetricType_COUNTER,
	} {
		f := fams[name]
		if f == nil {
			t.Errorf("%s missing from the scrape", name)
			continue
		}
		if f.GetType() != typ {
			t.Errorf("%s is a %v, want %v", name, f.GetType(), typ)
		}
	}
	x := fams["loom_x_total"]
	if x.GetHelp() != "Xs, with a \\ and a\nnewline." || x.Metric[0].Label[0].GetValue() != "set\n\"quoted\"" || x.Metric[0].Counter.GetValue() != 2 {
		t.Errorf("loom_x_total did not survive the round trip: %v", x)
	}
	h := fams["loom_h_seconds"].Metric[0].Histogram
	if h.GetSampleCount() != 1 || h.GetSampleSum() != 0.5 || len(h.Bucket) != 3 || h.Bucket[0].GetCumulativeCount() != 0 || h.Bucket[1].GetCumulativeCount() != 1 {
		t.Errorf("loom_h_seconds did not survive the round trip: %v", h)
	}
}
