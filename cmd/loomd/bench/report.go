package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Report is one run: where it ran and what each scenario measured.
type Report struct {
	StartedAt time.Time         `json:"started_at"`
	Seconds   float64           `json:"seconds"`
	Machine   Machine           `json:"machine"`
	Servers   Servers           `json:"servers"`
	Settings  map[string]string `json:"settings"`
	Scenarios []*ScenarioResult `json:"scenarios"`
}

// Machine is the size of the machine and how busy it was: on a shared machine the
// load average says how much of it the run had.
type Machine struct {
	Cores        int     `json:"cores"`
	MemoryGiB    float64 `json:"memory_gib"`
	OS           string  `json:"os"`
	Go           string  `json:"go"`
	LoadAvgStart string  `json:"load_average_start"` // 1, 5 and 15 minutes, from /proc/loadavg
	LoadAvgEnd   string  `json:"load_average_end"`
}

// Servers are the versions of the stores measured.
type Servers struct {
	Postgres   string `json:"postgres"`
	ClickHouse string `json:"clickhouse"`
	Kafka      string `json:"kafka"`
}

// ScenarioResult is one scenario: its rows, what its baseline is, and the raw samples.
type ScenarioResult struct {
	Name     string        `json:"name"`
	Title    string        `json:"title"`
	Baseline string        `json:"baseline"`
	Notes    []string      `json:"notes,omitempty"`
	Seconds  float64       `json:"seconds"`
	Rows     []Row         `json:"rows"`
	Samples  []CaseSamples `json:"samples,omitempty"`
}

// Row is one metric of one case, Loom beside its baseline.
type Row struct {
	Case     string   `json:"case"`
	Metric   string   `json:"metric"`
	Loom     float64  `json:"loom"`
	Baseline *float64 `json:"baseline,omitempty"`
	// Ratio is Loom ÷ baseline: above 1 Loom takes longer (a latency) or does more
	// (a rate, a count).
	Ratio *float64 `json:"ratio,omitempty"`
	// Gate is a release gate (docs/architecture.md) this row is judged by, with the verdict.
	Gate string `json:"gate,omitempty"`
}

// CaseSamples are a case's measured runs in full.
type CaseSamples struct {
	Case     string  `json:"case"`
	Loom     Sample  `json:"loom"`
	Baseline *Sample `json:"baseline,omitempty"`
}

// fewCalls is the sample size under which a run's percentiles are said to be rough.
const fewCalls = 20

// add appends a row of metric, with its ratio when the baseline is not zero.
func (s *ScenarioResult) add(caseName, metric string, loom, baseline float64) *Row {
	row := Row{Case: caseName, Metric: metric, Loom: loom, Baseline: &baseline}
	if baseline != 0 {
		ratio := round(loom/baseline, 2)
		row.Ratio = &ratio
	}
	s.Rows = append(s.Rows, row)
	return &s.Rows[len(s.Rows)-1]
}

// alone appends a row of metric with no baseline beside it.
func (s *ScenarioResult) alone(caseName, metric string, loom float64) {
	s.Rows = append(s.Rows, Row{Case: caseName, Metric: metric, Loom: loom})
}

// compare appends the latency rows and the rate row of two samples of one case, and
// returns the p50 row (for a gate to judge).
func (s *ScenarioResult) compare(caseName string, loom, baseline Sample, rate string) (p50 *Row) {
	first := len(s.Rows)
	s.add(caseName, "p50 ms", loom.P50MS, baseline.P50MS)
	s.add(caseName, "p99 ms", loom.P99MS, baseline.P99MS)
	s.add(caseName, "max ms", loom.MaxMS, baseline.MaxMS)
	s.add(caseName, rate, loom.PerSecond, baseline.PerSecond)
	s.Samples = append(s.Samples, CaseSamples{Case: caseName, Loom: loom, Baseline: &baseline})
	for _, side := range []struct {
		name   string
		sample Sample
	}{{"Loom", loom}, {"the baseline", baseline}} {
		if side.sample.Calls < fewCalls {
			s.Notes = append(s.Notes, fmt.Sprintf("%s: %s answered only %d calls in the run, so its p99 is its slowest; "+
				"a longer --duration gives a steadier figure", caseName, side.name, side.sample.Calls))
		}
		if side.sample.Errors > 0 {
			s.Notes = append(s.Notes, fmt.Sprintf("%s: %d of %d calls of %s were answered with an error, left out of the latencies: %v",
				caseName, side.sample.Errors, side.sample.Errors+side.sample.Calls, side.name, side.sample.ErrorKinds))
		}
	}
	return &s.Rows[first]
}

// describe starts the report: the machine, the servers and the settings that shape
// the numbers.
func (r *runner) describe(ctx context.Context, names []string) (*Report, error) {
	n := r.t.Process
	rep := &Report{
		StartedAt: time.Now().UTC().Truncate(time.Second),
		Machine: Machine{
			Cores: runtime.NumCPU(), MemoryGiB: memoryGiB(), OS: runtime.GOOS + "/" + runtime.GOARCH,
			Go: runtime.Version(), LoadAvgStart: loadAverage(),
		},
		Settings: map[string]string{
			"scenarios":                       strings.Join(names, ","),
			"duration per run":                r.opts.Duration.String(),
			"LOOM_PG_PUBLISH_INTERVAL_MS":     strconv.FormatInt(n.Cfg.Projector.Interval.Milliseconds(), 10),
			"LOOM_PROJECTOR_BUSY_INTERVAL_MS": strconv.FormatInt(n.Cfg.Projector.BusyInterval.Milliseconds(), 10),
			"LOOM_PG_DURABILITY":              string(n.Cfg.PG.Durability),
			"LOOM_TOPIC_PARTITIONS":           strconv.Itoa(int(n.Cfg.Kafka.TopicPartitions)),
			"LOOM_PG_POOL_MAX_SIZE":           strconv.Itoa(int(n.Cfg.PG.PoolMax)),
			"embedder":                        fmt.Sprintf("%s, %d dimensions", n.Embedder.Model(), n.Embedder.Dim()),
		},
	}
	if len(r.opts.Concurrency) > 0 {
		rep.Settings["concurrency"] = strings.Trim(fmt.Sprint(r.opts.Concurrency), "[]")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := n.PG.QueryRow(ctx, "SHOW server_version").Scan(&rep.Servers.Postgres); err != nil {
		return nil, fmt.Errorf("read the Postgres version: %w", err)
	}
	rep.Servers.Postgres = "PostgreSQL " + rep.Servers.Postgres
	rep.Servers.ClickHouse = "ClickHouse " + n.CH.Caps.Version
	rep.Servers.Kafka = kafkaDescription(n.Cfg.Kafka.Brokers)
	return rep, nil
}

// kafkaDescription names the broker: the Kafka protocol does not say which product
// answers it, so the embedded kfake is named by its module version, from this build.
func kafkaDescription(brokers []string) string {
	desc := "brokers " + strings.Join(brokers, ",")
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == "github.com/twmb/franz-go/pkg/kfake" {
				return desc + " (this build embeds kfake " + m.Version + ", which `loomd dev` and `loomd bench` run in-process)"
			}
		}
	}
	return desc
}

func (rep *Report) finish() {
	rep.Machine.LoadAvgEnd = loadAverage()
	rep.Seconds = round(time.Since(rep.StartedAt).Seconds(), 0)
}

// loadAverage is /proc/loadavg's first three fields, "" where there is none.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// memoryGiB is MemTotal from /proc/meminfo, 0 where there is none.
func memoryGiB() float64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return round(kb/(1<<20), 1)
		}
	}
	return 0
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteMarkdown writes the report for people: a header saying where it ran, then one
// table per scenario.
func (rep *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	m := rep.Machine
	fmt.Fprintf(&b, "# Loom benchmark, %s\n\n", rep.StartedAt.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- Machine: %d cores, %.1f GiB memory, %s, %s; load average (1, 5, 15 min) %s at the start, %s at the end\n",
		m.Cores, m.MemoryGiB, m.OS, m.Go, orDash(m.LoadAvgStart), orDash(m.LoadAvgEnd))
	fmt.Fprintf(&b, "- Servers: %s; %s; Kafka: %s\n", rep.Servers.Postgres, rep.Servers.ClickHouse, rep.Servers.Kafka)
	keys := make([]string, 0, len(rep.Settings))
	for k := range rep.Settings {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var settings []string
	for _, k := range keys {
		settings = append(settings, k+" "+rep.Settings[k])
	}
	fmt.Fprintf(&b, "- Settings: %s\n", strings.Join(settings, "; "))
	fmt.Fprintf(&b, "- Took %.0f s\n\n", rep.Seconds)
	if busy(m.LoadAvgStart, m.Cores) || busy(m.LoadAvgEnd, m.Cores) {
		b.WriteString("The load average was above the core count: other work shared this machine during the run, " +
			"so absolute figures are noisy; the ratios to same-run baselines are the numbers to read.\n\n")
	}
	b.WriteString("Every ratio is Loom ÷ its baseline, both measured in this run on this machine: " +
		"above 1 a latency is longer or a rate higher than the baseline's.\n")
	for _, s := range rep.Scenarios {
		fmt.Fprintf(&b, "\n## %s: %s\n\nBaseline: %s\n\n", s.Name, s.Title, s.Baseline)
		b.WriteString("| case | metric | Loom | baseline | ratio | gate |\n|---|---|---:|---:|---:|---|\n")
		for _, row := range s.Rows {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", row.Case, row.Metric, num(&row.Loom), num(row.Baseline), num(row.Ratio), row.Gate)
		}
		if len(s.Notes) > 0 {
			b.WriteString("\n")
			for _, n := range s.Notes {
				fmt.Fprintf(&b, "- %s\n", n)
			}
		}
		fmt.Fprintf(&b, "\n(%.0f s)\n", s.Seconds)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// busy says whether a load average's 1-minute figure exceeds the core count.
func busy(loadAvg string, cores int) bool {
	f := strings.Fields(loadAvg)
	if len(f) == 0 || cores == 0 {
		return false
	}
	one, err := strconv.ParseFloat(f[0], 64)
	return err == nil && one > float64(cores)
}

func num(v *float64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatFloat(*v, 'f', -1, 64)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
