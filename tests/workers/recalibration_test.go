package workers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/tests/testenv"
)

// The recalibration pass rewrites a namespace's recorded search background from its
// vectors: a namespace whose recorded background is stale (a median of 0.97) has a
// narrow search (one user's single row, a pool too small to hold its own background)
// judged against that floor; after the pass the recorded backgrounds are the
// namespace's own (stamped, one per probe), and the same search's floor is their
// median.
func TestRecalibrationRewritesTheNamespacesBackground(t *testing.T) {
	const org = "recalibration"
	var model string
	w := startWorkers(t, org, nil, func(c *config.Config) {
		// One pass at each process's start, none while the test writes; a batch that
		// takes every namespace the shared stores hold.
		c.Workers.Recalibration.Enabled, c.Workers.Recalibration.Interval = true, time.Hour
		c.Workers.Recalibration.Batch = 100000
		e, err := embed.New(c.Embedder)
		if err != nil {
			t.Fatal(err)
		}
		model = e.Model()
	})
	ctx := context.Background()
	pool := env.PG(t)
	ns := testenv.Unique(t, "recal")
	if _, err := w.tc.Configure(ctx, ns, client.NamespaceConfig{ConflictPolicy: "append_only"}); err != nil {
		t.Fatal(err)
	}
	topics := []string{"invoices", "parking", "lunch", "printers", "holidays", "laptops", "badges", "travel"}
	entries := []client.BulkEntry{{Key: "u1.desk", Value: "alice sits at desk 4 near the window", Identity: client.Identity{UserID: "u1"}}}
	for i := 0; i < 40; i++ {
		entries = append(entries, client.BulkEntry{Key: fmt.Sprintf("note.%d", i), Identity: client.Identity{UserID: "u2"},
			Value: fmt.Sprintf("note %d: the %s policy changed in week %d", i, topics[i%len(topics)], i)})
	}
	if _, err := w.tc.BulkSet(ctx, ns, client.BulkSetRequest{Entries: entries}); err != nil {
		t.Fatal(err)
	}
	stale, _ := json.Marshal([][2]float64{{0.97, 0.01}, {0.97, 0.01}, {0.97, 0.01}, {0.97, 0.01}, {0.97, 0.01}, {0.97, 0.01}, {0.97, 0.01}, {0.97, 0.01}})
	if _, err := pool.Exec(ctx, `INSERT INTO loom.search_calibration (org, namespace, embedder, samples, searches) VALUES ($1, $2, $3, $4::jsonb, 8)`,
		org, ns, model, stale); err != nil {
		t.Fatal(err)
	}
	narrow := func() *client.SearchAnswer {
		t.Helper()
		ans, err := w.tc.Search(ctx, ns, client.SearchRequest{Query: "where does alice sit", TopK: 3, UserID: "u1"})
		if err != nil {
			t.Fatal(err)
		}
		return ans
	}
	before := narrow()
	if c := before.RetrievalRisk.Components; c.Calibration != "namespace" || c.Floor != 0.97 {
		t.Fatalf("before the pass: calibration %s, floor %v; want the recorded 0.97", c.Calibration, c.Floor)
	}

	// The pass lists namespaces from ClickHouse's vectors: the restart waits until this
	// one's are projected there, or its one boot pass could miss it (the next is an hour
	// away). That pass takes every due namespace of the shared stores, so it is given time.
	conn := env.CH(t)
	testenv.Eventually(t, 60*time.Second, "the namespace's vectors in ClickHouse", func() bool {
		n := testenv.CHStrings(t, conn, `SELECT toString(count()) FROM loom.memory_embeddings FINAL
			WHERE org = ? AND namespace = ? AND tombstone = 0 AND embedding_dim > 0 AND embedding_model = ?`, org, ns, model)
		return len(n) == 1 && n[0] == fmt.Sprint(len(entries))
	})
	// A new process's pass (its first runs at its start) recalibrates the namespace.
	w.stop()
	w.serve()
	testenv.Eventually(t, 3*time.Minute, "the namespace recalibrated", func() bool {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.search_calibration WHERE org = $1 AND namespace = $2 AND embedder = $3
			AND recalibrated_at IS NOT NULL`, org, ns, model) == 1
	})
	// The pass in /v1/health's passes and in /metrics.
	op := env.Operator(t, w.url)
	testenv.Eventually(t, 30*time.Second, "health's recalibration pass run", func() bool {
		pass, _ := op.Do(t, http.MethodGet, "/v1/health", nil).JSON(t)["passes"].(map[string]any)["recalibration"].(map[string]any)
		return pass != nil && pass["enabled"] == true && pass["rows_done"].(float64) >= 1 && pass["last_run"] != nil
	})
	m := string(op.Do(t, http.MethodGet, "/metrics", nil).Body)
	if !strings.Contains(m, `loom_worker_pass_rows_total{worker="recalibration"}`) ||
		!strings.Contains(m, `loom_worker_pass_last_run_timestamp_seconds{worker="recalibration"}`) {
		t.Fatal("/metrics has no series of the recalibration pass")
	}
	var raw []byte
	if err := pool.QueryRow(ctx, `SELECT samples FROM loom.search_calibration WHERE org = $1 AND namespace = $2 AND embedder = $3`,
		org, ns, model).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var samples [][2]float64
	if err := json.Unmarshal(raw, &samples); err != nil {
		t.Fatal(err)
	}
	if len(samples) != 32 {
		t.Fatalf("recalibrated backgrounds: %d samples; want one per probe, 32", len(samples))
	}
	medians := make([]float64, len(samples))
	for i, s := range samples {
		medians[i] = s[0]
	}
	sort.Float64s(medians)
	median := medians[len(medians)/2]
	if median <= 0 || median >= 0.9 {
		t.Fatalf("recalibrated median %v; want the namespace's own background, well under the stale 0.97", median)
	}

	after := narrow()
	if c := after.RetrievalRisk.Components; c.Calibration != "namespace" || c.Floor != median {
		t.Fatalf("after the pass: calibration %s, floor %v; want the recalibrated median %v", c.Calibration, c.Floor, median)
	}
	if after.Verdict != client.VerdictOK || len(after.Hits) != 1 || after.Hits[0].MemoryKey != "u1.desk" {
		t.Fatalf("after the pass: verdict %s, hits %+v; want alice's desk served", after.Verdict, after.Hits)
	}
}
