package bench_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/loomplane/loom/cmd/loomd/bench"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
)

// The passes scenario runs end to end against a process running the usage fold: it
// reports memory.set and memory.search with each pass busy against both with none, with
// a ratio, and memory.consolidate's model calls per merged row (three clusters of three
// restatements: one call a cluster). The latencies are not judged here (this machine is
// shared); `loomd bench` measures them. One single-pass case runs (each case is two
// sides with their catch-up waits: every pass alone took six minutes of the suite).
func TestPassesScenarioComparesSetWithAndWithoutThePasses(t *testing.T) {
	n, url, _ := env.Serve(t, []string{"api", "workers"}, func(c *config.Config) {
		c.Workers.UsageFold.Enabled, c.Workers.UsageFold.Interval = true, 100*time.Millisecond
	})
	target := bench.Target{Process: n, URL: url, Token: env.Token(t, n, auth.NewToken{Org: "benchpasses"}), Org: "benchpasses",
		// The scenario runs the passes in a second process on the same stores, as loomd bench does.
		OpenPeer: openPeer(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	rep, err := bench.Run(ctx, target, bench.Options{Scenarios: []string{"passes"}, Duration: time.Second,
		Concurrency: []int{2}, GetRows: 20, Passes: []string{"session_digest"}, Progress: &progress})
	if err != nil {
		t.Fatalf("bench: %v\nprogress:\n%s", err, progress.String())
	}
	if len(rep.Scenarios) != 1 || !hasRow(rep.Scenarios[0], "concurrency=2, every pass, memory.set", "p50 ms") ||
		!hasRow(rep.Scenarios[0], "concurrency=2, every pass, memory.search", "p50 ms") ||
		!hasRow(rep.Scenarios[0], "concurrency=2, session_digest, memory.set", "p50 ms") ||
		hasRow(rep.Scenarios[0], "concurrency=2, usage_fold, memory.set", "p50 ms") {
		t.Fatalf("the passes scenario: %+v", rep.Scenarios)
	}
	for _, row := range rep.Scenarios[0].Rows {
		if row.Case == "memory.consolidate" && row.Metric == "model calls per merged row" && row.Loom != 1.0/3 && row.Loom != 0.333 {
			t.Fatalf("memory.consolidate's model calls per merged row: %v; want 0.333 (one call per cluster of three)", row.Loom)
		}
	}
	if !hasRow(rep.Scenarios[0], "memory.consolidate", "model calls per merged row") {
		t.Fatalf("no memory.consolidate row: %+v", rep.Scenarios[0].Rows)
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", md.String())
}
