package workers

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

const sensitivityWorker = "sensitivity_sweep"

// A consolidation's summary is the model's text, written without the write path's
// detector. The sensitivity sweep runs that detector over it: a summary holding an
// email address is relabelled high (its retention shortened) and leaves search, while
// a clean summary stays normal and found. A replay of the sweep's group relabels
// nothing twice, and /v1/health counts the pass's rows.
func TestSensitivitySweepRelabelsAModelWrittenSummaryHoldingAnEmail(t *testing.T) {
	const org = "sweep"
	start := time.Now().UTC()
	w := startWorkers(t, org, []string{sensitivityWorker}, func(c *config.Config) {
		c.Workers.SensitivitySweep.Enabled, c.Workers.SensitivitySweep.Interval = true, 100*time.Millisecond
	})
	w.srv.Script(func(r llmtest.ChatRequest) llmtest.Reply {
		if r.SchemaName != "consolidated_memory" {
			return llmtest.Status(500, "unscripted")
		}
		if strings.Contains(r.Text(), "green tea") {
			return llmtest.JSON(map[string]any{"key": "tea", "summary": "Al drinks green tea every afternoon"})
		}
		return llmtest.JSON(map[string]any{"key": "coffee",
			"summary": "Bo drinks dark roast coffee every morning; his coffee club writes to bo.roast@example.com"})
	})
	ctx := context.Background()
	ns := testenv.Unique(t, "sweep")
	w.c.AppendOnly(t, ns)
	for key, f := range map[string][2]string{
		"coffee-1": {"bo", "Bo drinks dark roast coffee every morning"},
		"coffee-2": {"bo", "Every morning Bo drinks a dark roast coffee"},
		"tea-1":    {"al", "Al drinks green tea every afternoon"},
		"tea-2":    {"al", "Every afternoon Al drinks a green tea"},
	} {
		if r := w.c.Put(t, ns, key, map[string]any{"value": f[1], "user_id": f[0]}); r.Status != http.StatusOK {
			t.Fatalf("set %s: %d %s", key, r.Status, r.Body)
		}
	}
	for _, user := range []string{"bo", "al"} {
		r := w.c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:consolidate",
			[]byte(`{"user_id":"`+user+`","min_similarity":0.6}`))
		if r.Status != http.StatusOK || r.JSON(t)["merged_rows"] != float64(2) {
			t.Fatalf("consolidate %s: %d %s; want two rows merged", user, r.Status, r.Body)
		}
	}
	pool := env.PG(t)
	drained(t, pool, sensitivityWorker, org)

	bo, al := get(t, w.tc, ns, "coffee", client.Identity{UserID: "bo"}), get(t, w.tc, ns, "tea", client.Identity{UserID: "al"})
	if bo.Sensitivity != "high" || bo.ExpiresAt == nil {
		t.Fatalf("the summary holding an email: sensitivity %q, expires %v; want high, under the sensitive retention", bo.Sensitivity, bo.ExpiresAt)
	}
	if al.Sensitivity == "high" {
		t.Fatalf("the clean summary was relabelled high")
	}
	if ops := journalOps(t, org, ns, bo.MemoryID); ops[len(ops)-1] != "memory.sensitivity_sweep" {
		t.Fatalf("the relabel's record: the summary's journal is %v", ops)
	}
	found := func(user, query string) []string {
		t.Helper()
		ans, err := w.tc.Search(ctx, ns, client.SearchRequest{Query: query, UserID: user, TopK: 5})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, h := range ans.Hits {
			keys = append(keys, h.MemoryKey)
		}
		return keys
	}
	testenv.Eventually(t, 30*time.Second, "the clean summary found, the relabelled one not", func() bool {
		tea, coffee := found("al", "green tea in the afternoon"), found("bo", "dark roast coffee in the morning")
		return len(tea) == 1 && tea[0] == "tea" && len(coffee) == 0
	})

	// One view of the pass in /v1/health: this process's account and, with
	// include=workers, the deployment's queue inside it; /metrics counts it too.
	// The queue is the deployment's: the relabel's own record passes through it, so
	// it is read until it settles rather than once.
	op := env.Operator(t, w.url)
	testenv.Eventually(t, 30*time.Second, "health's sensitivity_sweep pass run, both summaries done, none owed", func() bool {
		health := op.Do(t, http.MethodGet, "/v1/health?include=workers", nil).JSON(t)
		pass, _ := health["passes"].(map[string]any)[sensitivityWorker].(map[string]any)
		queue, _ := pass["queue"].(map[string]any)
		return pass != nil && pass["enabled"] == true && pass["rows_done"].(float64) >= 2 && pass["last_run"] != nil &&
			queue != nil && queue["done"].(float64) >= 2 && queue["owed"] == float64(0)
	})
	if plain := op.Do(t, http.MethodGet, "/v1/health", nil).JSON(t)["passes"].(map[string]any)[sensitivityWorker].(map[string]any); plain["queue"] != nil {
		t.Fatalf("health without include=workers shows a queue: %v", plain)
	}
	if m := op.Do(t, http.MethodGet, "/metrics", nil); !strings.Contains(string(m.Body), `loom_worker_pass_rows_total{worker="sensitivity_sweep"}`) {
		t.Fatal("/metrics has no loom_worker_pass_rows_total for the sensitivity sweep")
	}

	// A replay from the test's start queues both summaries again: nothing is relabelled twice.
	w.replay(start.Format(time.RFC3339Nano))
	drained(t, pool, sensitivityWorker, org)
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND op = 'memory.sensitivity_sweep'
		AND audit->>'actor' = 'worker:sensitivity_sweep'`, org, ns); n != 1 {
		t.Fatalf("%d relabels written as worker:sensitivity_sweep after a replay; want 1", n)
	}
}
