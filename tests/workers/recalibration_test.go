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
// median. The same pass records memory.set's thresholds from each namespace's
// background (checkJudgingCalibration's namespace).
func TestRecalibrationRewritesTheNamespacesBackground(t *testing.T) {
	const org = "recalibration"
	r := startRecalibration(t, org, 100000, func(c *config.Config) {
		// The scalars the calibration moves, and room for it to move them.
		c.Command.ConflictThreshold, c.Command.DuplicateThreshold = 0.7, 0.9
		c.Command.ConflictCalibration.Enabled, c.Command.ConflictCalibration.MaxShift = true, 0.1
	})
	w, model := r.workers, r.model
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

	judged := newJudgingNamespace(t, w, model)

	// The vectors are in ClickHouse before the pass starts (it would wait for the
	// projection otherwise), so the recalibration reads them all.
	conn := env.CH(t)
	for _, k := range []struct {
		ns   string
		rows int
	}{{ns, len(entries)}, {judged.ns, judged.rows}} {
		testenv.Eventually(t, 60*time.Second, "the namespace's vectors in ClickHouse", func() bool {
			n := testenv.CHStrings(t, conn, `SELECT toString(count()) FROM loom.memory_embeddings FINAL
			WHERE org = ? AND namespace = ? AND tombstone = 0 AND embedding_dim > 0 AND embedding_model = ?`, org, k.ns, model)
			return len(n) == 1 && n[0] == fmt.Sprint(k.rows)
		})
	}
	// A new process with the pass on recalibrates the namespaces its records name.
	r.recalibrate()
	testenv.Eventually(t, 3*time.Minute, "the namespaces recalibrated", func() bool {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.search_calibration WHERE org = $1 AND namespace = ANY($2) AND embedder = $3
			AND recalibrated_at IS NOT NULL`, org, []string{ns, judged.ns}, model) == 2
	})
	judged.after(t, w)
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
	median := recalibratedMedian(t, org, ns, model)
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

// recalibratedMedian reads the namespace's recorded backgrounds, one per probe, and
// returns their median.
// recalibration is a test's workers with the recalibration pass off while the test
// writes; recalibrate restarts them with it on (hourly, batch items a claim), and the
// new process reads the test's records from its group's place. model is the
// embedder's.
type recalibration struct {
	*workers
	model string
	on    bool
}

func startRecalibration(t *testing.T, org string, batch int, mod func(*config.Config)) *recalibration {
	t.Helper()
	r := &recalibration{}
	r.workers = startWorkers(t, org, nil, func(c *config.Config) {
		c.Workers.Recalibration.Enabled, c.Workers.Recalibration.Interval = r.on, time.Hour
		c.Workers.Recalibration.Batch = batch
		e, err := embed.New(c.Embedder)
		if err != nil {
			t.Fatal(err)
		}
		r.model = e.Model()
		if mod != nil {
			mod(c)
		}
	})
	return r
}

// recalibrate restarts the workers with the pass on.
func (r *recalibration) recalibrate() {
	r.stop()
	r.on = true
	r.serve()
}

func recalibratedMedian(t *testing.T, org, ns, model string) float64 {
	t.Helper()
	ctx, pool := context.Background(), env.PG(t)
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
	return median
}

// judgingNamespace is a namespace whose rows all look alike (a high background): the
// scalar threshold calls "the user lives in Berlin" a conflict of its Lisbon row, and
// the thresholds its recalibration records call it new.
type judgingNamespace struct {
	ns   string
	rows int
	// cosine is the hash embedder's of the two statements.
	cosine float64
}

func newJudgingNamespace(t *testing.T, w *workers, model string) *judgingNamespace {
	t.Helper()
	ctx := context.Background()
	j := &judgingNamespace{ns: testenv.Unique(t, "recal-judge")}
	// Written append_only, so the alike rows are not judged duplicates of one another
	// (the pass samples served rows); judged as the default policy after.
	if _, err := w.tc.Configure(ctx, j.ns, client.NamespaceConfig{ConflictPolicy: "append_only"}); err != nil {
		t.Fatal(err)
	}
	things := []string{"colour", "food", "city", "sport", "band", "film", "book", "drink"}
	entries := []client.BulkEntry{{Key: "home", Value: "the user lives in Lisbon"}}
	for i := 0; i < 40; i++ {
		entries = append(entries, client.BulkEntry{Key: fmt.Sprintf("fav.%d", i), Value: fmt.Sprintf("the user's favourite %s is number %d", things[i%len(things)], i)})
	}
	if _, err := w.tc.BulkSet(ctx, j.ns, client.BulkSetRequest{Entries: entries}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.tc.Configure(ctx, j.ns, client.NamespaceConfig{ConflictPolicy: "auto_reinforce"}); err != nil {
		t.Fatal(err)
	}
	j.rows = len(entries)
	e, err := embed.New(env.Config(nil).Embedder)
	if err != nil || e.Model() != model {
		t.Fatalf("embedder %v, %v", e, err)
	}
	vs, err := e.Embed(ctx, []string{"the user lives in Lisbon", "the user lives in Berlin"})
	if err != nil {
		t.Fatal(err)
	}
	if j.cosine = embed.Dot(vs[0], vs[1]); j.cosine < 0.7 || j.cosine >= 0.8 {
		t.Fatalf("the pair's cosine %v: the test needs it between the scalar 0.7 and the calibrated 0.8", j.cosine)
	}
	if v := j.berlin(t, w); v != "conflict" {
		t.Fatalf("before the pass: verdict %s; want conflict at the scalar threshold", v)
	}
	return j
}

// berlin is the verdict a dry run of the Berlin statement gets.
func (j *judgingNamespace) berlin(t *testing.T, w *workers) string {
	t.Helper()
	ans, err := w.tc.Set(context.Background(), j.ns, "moved", client.SetRequest{Value: "the user lives in Berlin", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	return ans.Verdict
}

// after checks the recorded thresholds (the conflict one moved by the max shift, 0.1,
// as the namespace's median sits far above the baseline; the duplicate one raised) and
// that memory.set now reads them: the same dry run is no longer a conflict.
func (j *judgingNamespace) after(t *testing.T, w *workers) {
	t.Helper()
	var conflict, duplicate float64
	if err := env.PG(t).QueryRow(context.Background(), `SELECT conflict_threshold, duplicate_threshold FROM loom.search_calibration
		WHERE org = $1 AND namespace = $2`, w.org, j.ns).Scan(&conflict, &duplicate); err != nil {
		t.Fatal(err)
	}
	if conflict != 0.8 || duplicate <= 0.9 || duplicate > 1 {
		t.Fatalf("recorded thresholds %v and %v; want 0.8, and the duplicate one raised from 0.9", conflict, duplicate)
	}
	// A process reads a namespace's thresholds once a minute at most: the pass ran in
	// this one, which dropped its cache.
	if v := j.berlin(t, w); v != "new" {
		t.Fatalf("after the pass: verdict %s; want new at the calibrated threshold %v (cosine %v)", v, conflict, j.cosine)
	}
}

// A namespace too small for a background is not sampled until it has drawn as many
// seqs as a background needs vectors (workers/recalibration.go, recalShortfalls), and
// is recalibrated at the first pass that can find enough: twelve vectors, then exactly
// the eighteen more that make the minimum of thirty.
func TestASmallNamespaceIsRecalibratedOnceItHasEnoughVectors(t *testing.T) {
	const org = "recalibration-small"
	var model string
	w := startWorkers(t, org, nil, func(c *config.Config) {
		c.Workers.Recalibration.Enabled, c.Workers.Recalibration.Interval = true, time.Hour
		e, err := embed.New(c.Embedder)
		if err != nil {
			t.Fatal(err)
		}
		model = e.Model()
	})
	ctx, pool := context.Background(), env.PG(t)
	ns := testenv.Unique(t, "recal-small")
	if _, err := w.tc.Configure(ctx, ns, client.NamespaceConfig{ConflictPolicy: "append_only"}); err != nil {
		t.Fatal(err)
	}
	topics := []string{"invoices", "parking", "lunch", "printers", "holidays", "laptops", "badges", "travel"}
	write := func(from, to int) {
		t.Helper()
		var entries []client.BulkEntry
		for i := from; i < to; i++ {
			entries = append(entries, client.BulkEntry{Key: fmt.Sprintf("note.%d", i),
				Value: fmt.Sprintf("note %d: the %s policy changed in week %d", i, topics[i%len(topics)], i)})
		}
		if _, err := w.tc.BulkSet(ctx, ns, client.BulkSetRequest{Entries: entries}); err != nil {
			t.Fatal(err)
		}
	}
	recalibrated := func() int64 {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.search_calibration WHERE org = $1 AND namespace = $2 AND embedder = $3
			AND recalibrated_at IS NOT NULL`, org, ns, model)
	}
	write(0, 12)
	testenv.Eventually(t, 2*time.Minute, "the pass to take the twelve", func() bool {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.worker_items WHERE worker = 'recalibration' AND org = $1 AND namespace = $2
			AND state = 'owed'`, org, ns) == 0 && testenv.Int(t, pool, `SELECT count(*) FROM loom.worker_items
			WHERE worker = 'recalibration' AND org = $1 AND namespace = $2`, org, ns) > 0
	})
	if n := recalibrated(); n != 0 {
		t.Fatalf("twelve vectors recalibrated the namespace (%d rows)", n)
	}
	write(12, 30)
	testenv.Eventually(t, 2*time.Minute, "the namespace recalibrated at thirty vectors", func() bool { return recalibrated() == 1 })
}
