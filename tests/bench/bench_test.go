package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/cmd/loomd/bench"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/tracing"
)

// Three scenarios at a tiny size run end to end: each measures Loom and its baseline,
// reports a ratio, and the report renders as markdown and JSON. The figures are not
// judged (this machine is shared); that they exist is.
func TestQuickScenariosMeasureLoomAgainstTheirBaselines(t *testing.T) {
	// The process traces into the lag scenario's hop recorder, as loomd bench's does.
	hops := bench.NewHops()
	n, url := env.API(t, nil, app.WithTracing(tracing.Recording(hops, hops.On)))
	target := bench.Target{Process: n, URL: url, Token: env.Token(t, n, auth.NewToken{Org: "bench"}), Org: "bench", Hops: hops}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	rep, err := bench.Run(ctx, target, bench.Options{
		Scenarios: []string{"lag", "get", "coldstart"}, Duration: 300 * time.Millisecond, Concurrency: []int{2},
		GetRows: 20, Progress: &progress,
	})
	if err != nil {
		t.Fatalf("bench: %v\nprogress:\n%s", err, progress.String())
	}
	if len(rep.Scenarios) != 3 || rep.Scenarios[0].Name != "lag" || rep.Scenarios[1].Name != "get" || rep.Scenarios[2].Name != "coldstart" {
		t.Fatalf("scenarios: %+v", rep.Scenarios)
	}
	// The lag scenario watches the process's own index; cold start reports what a fresh
	// one holds per memory, from a replay and from a checkpoint.
	// It splits commit→index into its hops from the writes' spans when this process's
	// relay publishes them; the test env's relay runs in a process of its own, so the
	// scenario says it saw none (the split itself: TestHopsSplit… in cmd/loomd/bench).
	if !slices.ContainsFunc(rep.Scenarios[0].Notes, func(n string) bool { return strings.Contains(n, "no traced write's hops were all seen") }) {
		t.Errorf("the lag scenario does not say why it split no hops: %q", rep.Scenarios[0].Notes)
	}
	if !hasRow(rep.Scenarios[0], "commit→index", "p99 ms") || !hasRow(rep.Scenarios[2], "graphs built", "bytes/memory (estimate)") || !hasRow(rep.Scenarios[2], "checkpoint of", "records/s") {
		t.Fatalf("the index rows are missing: %+v %+v", rep.Scenarios[0].Rows, rep.Scenarios[2].Rows)
	}
	for _, s := range rep.Scenarios {
		ratios := 0
		for _, row := range s.Rows {
			if row.Ratio != nil && *row.Ratio > 0 {
				ratios++
			}
		}
		if ratios == 0 || s.Baseline == "" {
			t.Fatalf("%s reports no ratio to a baseline: %+v", s.Name, s.Rows)
		}
	}
	if gate := rep.Scenarios[1].Rows[0].Gate; !strings.HasPrefix(gate, "p50 ≤ 15 ms: ") {
		t.Fatalf("memory.get's p50 row carries no gate verdict: %q", gate)
	}
	if !strings.Contains(progress.String(), "bench: scenario lag") {
		t.Fatalf("no progress on the progress stream:\n%s", progress.String())
	}

	var md, js bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Loom benchmark", "ClickHouse 18.", "PostgreSQL ", "## lag:", "## get:", "| case | metric | Loom | baseline | ratio | gate |"} {
		if !strings.Contains(md.String(), want) {
			t.Fatalf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back bench.Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Scenarios) != 3 || back.Machine.Cores == 0 {
		t.Fatalf("JSON does not read back (%v): %s", err, js.String())
	}
}

// hasRow says whether s has a row of metric whose case names what, with a figure.
func hasRow(s *bench.ScenarioResult, what, metric string) bool {
	for _, row := range s.Rows {
		if strings.Contains(row.Case, what) && row.Metric == metric && row.Loom > 0 {
			return true
		}
	}
	return false
}

// The history scenario reports memory.history beside a point read of the same keys in
// the same run, judged against its gate (p50 ≤ 5× memory.get's).
func TestHistoryScenarioReportsItBesideAPointRead(t *testing.T) {
	n, url := env.API(t, nil)
	target := bench.Target{Process: n, URL: url, Token: env.Token(t, n, auth.NewToken{Org: "bench"}), Org: "bench"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	rep, err := bench.Run(ctx, target, bench.Options{Scenarios: []string{"history"}, Duration: 300 * time.Millisecond,
		Concurrency: []int{2}, GetRows: 20, Progress: &progress})
	if err != nil {
		t.Fatalf("bench: %v\nprogress:\n%s", err, progress.String())
	}
	rows := rep.Scenarios[0].Rows
	if len(rows) != 4 || rows[0].Metric != "p50 ms" || rows[0].Baseline == nil || rows[0].Ratio == nil ||
		!strings.HasPrefix(rows[0].Gate, "p50 ≤ 5× memory.get's: ") {
		t.Fatalf("rows: %+v", rows)
	}
}

// The extract scenario runs memory.set_from_messages against the scripted provider and
// reports the pipeline's time beside a memory.bulk_set of the same facts, its round
// trips to the provider, and its time beside the same extraction in a second process
// that keeps no inputs (the scenario checks the one kept the turns and the other none).
func TestExtractScenarioReportsRoundTrips(t *testing.T) {
	provider := bench.StartScriptedProvider()
	t.Cleanup(func() {
		if err := provider.Close(); err != nil {
			t.Error(err)
		}
	})
	n, url := env.API(t, func(c *config.Config) { c.LLM.BaseURL, c.LLM.Model = provider.URL, bench.ScriptedModel })
	target := bench.Target{Process: n, URL: url, Token: env.Token(t, n, auth.NewToken{Org: "bench"}), Org: "bench",
		OpenPeer: openPeer(t)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, target, bench.Options{Scenarios: []string{"extract"}, Duration: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rows := rep.Scenarios[0].Rows
	if len(rows) != 7 || rows[0].Ratio == nil || rows[1].Loom != 1 || rows[3].Case != "10 facts, inputs kept vs none" || rows[3].Ratio == nil || rows[5].Loom <= 0 || rows[5].Baseline == nil || *rows[5].Baseline <= 0 {
		t.Fatalf("rows: %+v", rows)
	}
}

// The search scenario reports its verdicts as abstain precision and recall apart, for
// each path and size, beside the latencies.
func TestSearchScenarioReportsAbstainPrecisionAndRecall(t *testing.T) {
	n, url := env.API(t, nil)
	target := bench.Target{Process: n, URL: url, Token: env.Token(t, n, auth.NewToken{Org: "bench"}), Org: "bench"}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	rep, err := bench.Run(ctx, target, bench.Options{
		Scenarios: []string{"search"}, Duration: 200 * time.Millisecond, Concurrency: []int{1}, SearchSizes: []int{200}, Progress: &progress,
	})
	if err != nil {
		t.Fatalf("bench: %v\nprogress:\n%s", err, progress.String())
	}
	s := rep.Scenarios[0]
	for _, metric := range []string{"abstain precision", "abstain recall", "answerable abstained", "no-answer abstained"} {
		found := false
		for _, row := range s.Rows {
			if strings.Contains(row.Case, "200 memories, index") && row.Metric == metric {
				found = true
				if strings.HasPrefix(metric, "abstain") && (row.Loom < 0 || row.Loom > 1) {
					t.Errorf("%s is %v, not a share", metric, row.Loom)
				}
			}
		}
		if !found {
			t.Errorf("no %q row: %+v", metric, s.Rows)
		}
	}
	// Each concurrency's searches are reported beside a point read of the same namespace.
	if !hasRow(s, "200 memories, concurrency=1, index, search against a point read", "p50 ms") {
		t.Errorf("no search-against-a-point-read row: %+v", s.Rows)
	}
	for _, row := range s.Rows {
		t.Logf("%s | %s | %v", row.Case, row.Metric, row.Loom)
	}
}

// The conversations scenario loads the quality suite's conversation corpus and reports
// search's p50 against issue 34's gate beside the bare exact scan, and each half's
// recall@5 and abstentions.
func TestConversationsScenarioReportsTheLatencyGateAndRecall(t *testing.T) {
	n, url := env.API(t, nil)
	target := bench.Target{Process: n, URL: url, Token: env.Token(t, n, auth.NewToken{Org: "bench"}), Org: "bench"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	rep, err := bench.Run(ctx, target, bench.Options{Scenarios: []string{"conversations"}, Duration: 200 * time.Millisecond,
		Concurrency: []int{1}, Conversations: "../quality/conversations.json", Progress: &progress})
	if err != nil {
		t.Fatalf("bench: %v\nprogress:\n%s", err, progress.String())
	}
	s := rep.Scenarios[0]
	if !hasRow(s, "held_out half", "recall@5") || !hasRow(s, "tuning half", "recall@5") {
		t.Errorf("no recall@5 row for each half: %+v", s.Rows)
	}
	gated := false
	for _, row := range s.Rows {
		t.Logf("%s | %s | %v | %s", row.Case, row.Metric, row.Loom, row.Gate)
		if row.Metric == "p50 ms" && row.Ratio != nil && strings.HasPrefix(row.Gate, "p50 ≤ 10 ms: ") {
			gated = true
		}
	}
	if !gated {
		t.Errorf("no p50 row judged by the 10 ms gate beside its baseline: %+v", s.Rows)
	}
}

// The set scenario reports, beside its latencies, what a write cost: CPU by process and
// Postgres round trips, Loom's counted by the tracer the process is given. A judged
// write of a new key takes two round trips of its own (its commit's; the round's read is
// skipped), the relay's and the projector's come on top, and the raw commit takes four.
func TestSetScenarioReportsRoundTripsAndCPUPerWrite(t *testing.T) {
	trips := &bench.RoundTrips{}
	n, url := env.API(t, nil, app.WithPGTracer(trips))
	target := bench.Target{Process: n, URL: url, Token: env.Token(t, n, auth.NewToken{Org: "bench"}), Org: "bench", RoundTrips: trips}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, target, bench.Options{Scenarios: []string{"set"}, Duration: 300 * time.Millisecond, Concurrency: []int{1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"namespaces=1 ", "namespaces=32 "} {
		var rt *bench.Row
		for i, row := range rep.Scenarios[0].Rows {
			if strings.HasPrefix(row.Case, ns) && row.Metric == "Postgres round trips/write" {
				rt = &rep.Scenarios[0].Rows[i]
			}
		}
		if rt == nil || rt.Loom < 2 || rt.Baseline == nil || *rt.Baseline != 4 {
			t.Errorf("%s: round trips/write %+v, want Loom's at least 2 and the raw commit's 4", ns, rt)
		}
		if !hasRow(rep.Scenarios[0], ns, "CPU ms/write, loomd") {
			t.Errorf("%s: no CPU per write of loomd: %+v", ns, rep.Scenarios[0].Rows)
		}
	}
}

// openPeer opens a second process of the test's stores for a scenario (bench.Target's
// OpenPeer), its Postgres round trips counted in trips when given.
func openPeer(t *testing.T) func(context.Context, config.Config, *bench.RoundTrips) (string, func(), error) {
	return func(_ context.Context, cfg config.Config, trips *bench.RoundTrips) (string, func(), error) {
		var opts []app.Option
		if trips != nil {
			opts = append(opts, app.WithPGTracer(trips))
		}
		url, stop := env.ServeProcess(t, env.Open(t, func(c *config.Config) { *c = cfg }, opts...))
		return url, stop, nil
	}
}

// The search scenario's corpus is the same in every run, in a namespace named by its
// size alone: a run on stores an earlier run left (`loomd bench --dir`) checks that the
// namespace serves every value of the corpus and loads nothing, and a namespace that
// differs in one value is loaded again, back to the corpus.
func TestSearchScenarioReusesTheCorpusAnEarlierRunLoaded(t *testing.T) {
	const size = 150
	n, url := env.API(t, nil)
	token := env.Token(t, n, auth.NewToken{Org: "bench"})
	target := bench.Target{Process: n, URL: url, Token: token, Org: "bench"}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func() string {
		var progress bytes.Buffer
		_, err := bench.Run(ctx, target, bench.Options{
			Scenarios: []string{"search"}, Duration: 100 * time.Millisecond, Concurrency: []int{1}, SearchSizes: []int{size}, Progress: &progress,
		})
		if err != nil {
			t.Fatalf("bench: %v\nprogress:\n%s", err, progress.String())
		}
		return progress.String()
	}
	run() // loads the corpus unless this package's stores hold it already
	if p := run(); strings.Contains(p, "loading ") || !strings.Contains(p, "not loaded again") {
		t.Fatalf("the second run on the same stores loaded the corpus again:\n%s", p)
	}
	api, err := client.New(url, token)
	if err != nil {
		t.Fatal(err)
	}
	const ns, key = "bench-corpus1-search-150", "k0000007"
	if _, err := api.Set(ctx, ns, key, client.SetRequest{Value: "a value of no corpus"}); err != nil {
		t.Fatal(err)
	}
	if p := run(); !strings.Contains(p, fmt.Sprintf("loading %d memories into %s", size, ns)) {
		t.Fatalf("a run on a corpus with one value changed did not load it again:\n%s", p)
	}
	m, err := api.Get(ctx, ns, key, client.Identity{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Value) == `"a value of no corpus"` {
		t.Fatalf("%s after the load: %s; want the corpus's value back", key, m.Value)
	}
}
