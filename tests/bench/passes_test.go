package bench_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/cmd/loomd/bench"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
)

// The passes scenario runs end to end against a process running the usage fold: it
// reports memory.set with the fold busy against memory.set alone, with a ratio. The
// figures are not judged here (this machine is shared); `loomd bench` measures them.
func TestPassesScenarioComparesSetWithAndWithoutThePasses(t *testing.T) {
	n, url, _ := env.Serve(t, []string{"api", "workers"}, func(c *config.Config) {
		c.Workers.UsageFold.Enabled, c.Workers.UsageFold.Interval = true, 100*time.Millisecond
	})
	target := bench.Target{Process: n, URL: url, Token: env.Token(t, n, auth.NewToken{Org: "benchpasses"}), Org: "benchpasses",
		// The scenario runs the passes in a second process on the same stores, as loomd bench does.
		OpenPeer: func(_ context.Context, cfg config.Config, trips *bench.RoundTrips) (string, func(), error) {
			var opts []app.Option
			if trips != nil {
				opts = append(opts, app.WithPGTracer(trips))
			}
			url, stop := env.ServeProcess(t, env.Open(t, func(c *config.Config) { *c = cfg }, opts...))
			return url, stop, nil
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	rep, err := bench.Run(ctx, target, bench.Options{Scenarios: []string{"passes"}, Duration: 2 * time.Second,
		Concurrency: []int{2}, GetRows: 20, Progress: &progress})
	if err != nil {
		t.Fatalf("bench: %v\nprogress:\n%s", err, progress.String())
	}
	if len(rep.Scenarios) != 1 || !hasRow(rep.Scenarios[0], "concurrency=2", "p50 ms") {
		t.Fatalf("the passes scenario: %+v", rep.Scenarios)
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", md.String())
}
