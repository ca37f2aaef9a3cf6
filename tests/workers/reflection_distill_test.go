package workers

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// scriptedReflector answers the reflection_distill pass's calls of this test's
// conversation (marked by its words): first an answer outside the schema, then a label
// and one reflection; it counts the calls it answered.
type scriptedReflector struct {
	mu    sync.Mutex
	calls int
	other int // calls naming the namespace that did not opt in
}

func (d *scriptedReflector) reply(r llmtest.ChatRequest) llmtest.Reply {
	if r.SchemaName != "reflection_distill" {
		return llmtest.Status(500, "unscripted")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case r.Contains("kombucha"):
		d.other++
	case r.Contains("sourdough"):
		d.calls++
		if d.calls == 1 {
			return llmtest.Raw(`{"outcome": "great", "reflections": ["an answer outside the schema"]}`)
		}
		return llmtest.JSON(map[string]any{"outcome": "failed",
			"reflections": []string{"Ask which flour the user has before suggesting a bread recipe"}})
	}
	return llmtest.JSON(map[string]any{"outcome": "unclear", "reflections": []string{}})
}

func (d *scriptedReflector) counts() (int, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls, d.other
}

// A quiet session of a namespace that opts in gets an outcome label and a reflection
// row from one model call held to the schema (an answer outside it is refused and
// asked again, never stored); the reflection is found only by a search that asks for
// memory_type reflection; a namespace that does not opt in is not read; a session
// labelled is not asked again; the pass shows in health and /metrics; an erasure of
// the user takes the label and the reflection.
func TestReflectionDistillLabelsAQuietSession(t *testing.T) {
	const org = "reflections"
	w := startWorkers(t, org, nil, func(c *config.Config) {
		c.Workers.ReflectionDistill.Enabled = true
		c.Workers.ReflectionDistill.Interval = 100 * time.Millisecond
		c.Workers.ReflectionDistill.Idle = time.Second
	})
	d := &scriptedReflector{}
	w.srv.Script(d.reply)
	ctx := context.Background()
	pool := env.PG(t)
	ns, off := testenv.Unique(t, "refl"), testenv.Unique(t, "reflOff")
	w.c.Configure(t, ns, map[string]any{"reflection_distill": true})
	alice := client.Identity{UserID: "alice", SessionID: "s1"}
	if _, err := w.tc.Observe(ctx, ns, client.ObserveRequest{Identity: alice, Turns: turns(
		"Can you give me a recipe for sourdough bread?", "Sure: 500 g of rye flour, 350 g of water, 100 g of starter.",
		"I only have spelt flour, so this does not help me.")}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.tc.Observe(ctx, off, client.ObserveRequest{Identity: alice, Turns: turns("How do I brew kombucha?")}); err != nil {
		t.Fatal(err)
	}
	reflectionSessionIsLabelled(t, ctx, pool, d, org, ns)
	reflectionFoundOnlyAsAReflection(t, w, ns)
	reflectionLaterPassesAskNothing(t, ctx, w, pool, d, org, off)
	reflectionErasureTakesLabelAndReflection(t, ctx, w, pool, org, ns)
}

// reflectionLabel reads alice's s1 outcome label in ns ("" when there is none): the
// steps check it appears, stays off the namespace that did not opt in, and is erased.
func reflectionLabel(t *testing.T, ctx context.Context, pool *pgxpool.Pool, org, ns string) (outcome string, reflections int64) {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT outcome, reflections FROM loom.session_outcomes WHERE org = $1 AND namespace = $2 AND user_id = loom.user_ref(org, 'alice') AND session_id = loom.session_ref(org, 's1')`, org, ns)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := rows.Scan(&outcome, &reflections); err != nil {
			t.Fatal(err)
		}
	}
	return outcome, reflections
}

// reflectionSearch searches ns with the body and answers its hits: the steps search
// for the reflection with and without memory_type.
func reflectionSearch(t *testing.T, w *workers, ns, body string) []any {
	t.Helper()
	r := w.c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:search", []byte(body))
	if r.Status != http.StatusOK {
		t.Fatalf("search %s: %d %s", body, r.Status, r.Body)
	}
	hits, _ := r.JSON(t)["hits"].([]any)
	return hits
}

// reflectionSessionIsLabelled waits for the pass to label the session and checks the
// label is the schema's answer, reached in two calls (the first answer refused).
func reflectionSessionIsLabelled(t *testing.T, ctx context.Context, pool *pgxpool.Pool, d *scriptedReflector, org, ns string) {
	testenv.Eventually(t, 60*time.Second, "the session's outcome label", func() bool {
		o, _ := reflectionLabel(t, ctx, pool, org, ns)
		return o != ""
	})
	if o, n := reflectionLabel(t, ctx, pool, org, ns); o != "failed" || n != 1 {
		t.Fatalf("the label: %q with %d reflections; want the schema's answer, failed with 1", o, n)
	}
	if calls, _ := d.counts(); calls != 2 {
		t.Fatalf("%d model calls for the session; want 2 (the answer outside the schema refused, asked again)", calls)
	}
}

// reflectionFoundOnlyAsAReflection checks a search asking for memory_type reflection
// finds the session's reflection, and an unfiltered search does not serve it.
func reflectionFoundOnlyAsAReflection(t *testing.T, w *workers, ns string) {
	asked := reflectionSearch(t, w, ns, `{"query": "which flour does the user have for a bread recipe", "memory_type": "reflection"}`)
	if len(asked) != 1 {
		t.Fatalf("a search for reflections: %v", asked)
	}
	h := asked[0].(map[string]any)
	if h["memory_key"] != "reflection:s1" || h["user_id"] != "alice" || h["session_id"] != "s1" ||
		!strings.Contains(fmt.Sprint(h["value"]), "Ask which flour the user has") {
		t.Fatalf("the reflection hit: %v", h)
	}
	if hits := reflectionSearch(t, w, ns, `{"query": "which flour does the user have for a bread recipe"}`); len(hits) != 0 {
		t.Fatalf("an unfiltered search served the reflection: %v", hits)
	}
}

// reflectionLaterPassesAskNothing waits out two more passes: the labelled session and
// the namespace that did not opt in get no call, and health and /metrics show the pass.
func reflectionLaterPassesAskNothing(t *testing.T, ctx context.Context, w *workers, pool *pgxpool.Pool, d *scriptedReflector, org, off string) {
	// Later passes ask nothing more of the labelled session, nor of the namespace that
	// did not opt in; health and /metrics show the pass.
	op := env.Operator(t, w.url)
	passRuns := func() (string, float64) {
		pass, _ := op.Do(t, http.MethodGet, "/v1/health", nil).JSON(t)["passes"].(map[string]any)["reflection_distill"].(map[string]any)
		last, _ := pass["last_run"].(string)
		done, _ := pass["rows_done"].(float64)
		if pass["enabled"] != true {
			t.Fatalf("health's reflection_distill pass: %v", pass)
		}
		return last, done
	}
	if _, done := passRuns(); done < 1 {
		t.Fatalf("health's reflection_distill rows_done %v after the label", done)
	}
	for range 2 { // a whole pass begun after the label was kept
		prev, _ := passRuns()
		testenv.Eventually(t, 30*time.Second, "another reflection_distill pass", func() bool { last, _ := passRuns(); return last != prev })
	}
	if calls, other := d.counts(); calls != 2 || other != 0 {
		t.Fatalf("after more passes: %d calls for the labelled session (want 2), %d for the namespace that did not opt in (want 0)", calls, other)
	}
	if o, _ := reflectionLabel(t, ctx, pool, org, off); o != "" {
		t.Fatalf("the namespace that did not opt in was labelled %q", o)
	}
	if m := op.Do(t, http.MethodGet, "/metrics", nil); !strings.Contains(string(m.Body), `loom_worker_pass_rows_total{worker="reflection_distill"}`) {
		t.Fatal("/metrics does not count the pass's rows")
	}
}

// reflectionErasureTakesLabelAndReflection erases alice in ns: her label and her
// reflection go with her.
func reflectionErasureTakesLabelAndReflection(t *testing.T, ctx context.Context, w *workers, pool *pgxpool.Pool, org, ns string) {
	// The label and the reflection are the user's: their erasure takes both.
	w.c.Erase(t, map[string]any{"user_id": "alice", "namespace": ns})
	if o, _ := reflectionLabel(t, ctx, pool, org, ns); o != "" {
		t.Fatalf("the label after the erasure: %q", o)
	}
	if hits := reflectionSearch(t, w, ns, `{"query": "which flour does the user have for a bread recipe", "memory_type": "reflection"}`); len(hits) != 0 {
		t.Fatalf("the reflection after the erasure: %v", hits)
	}
}

// Two processes run the pass over one quiet session: the first claims it and holds
// its model call for three seconds, through the other's passes, which read the session
// owed all the while; the session costs one model call, not one a process (the
// label's window end would keep one commit of two calls).
func TestReflectionDistillTwoProcessesCallTheModelOnce(t *testing.T) {
	const org = "reflections-two"
	mod := func(c *config.Config) {
		c.Workers.ReflectionDistill.Enabled = true
		c.Workers.ReflectionDistill.Interval = 100 * time.Millisecond
		c.Workers.ReflectionDistill.Idle = time.Second
	}
	w := startWorkers(t, org, nil, mod)
	env.Serve(t, []string{"workers"}, withModel(w.srv, nil, mod))
	var mu sync.Mutex
	calls := 0
	w.srv.Script(func(r llmtest.ChatRequest) llmtest.Reply {
		if r.SchemaName != "reflection_distill" {
			return llmtest.Status(500, "unscripted")
		}
		if !r.Contains("meringue") {
			return llmtest.JSON(map[string]any{"outcome": "unclear", "reflections": []string{}})
		}
		mu.Lock()
		calls++
		mu.Unlock()
		return llmtest.JSON(map[string]any{"outcome": "achieved",
			"reflections": []string{"Give the oven temperature with a meringue recipe"}}).After(3 * time.Second)
	})
	ctx := context.Background()
	pool := env.PG(t)
	ns := testenv.Unique(t, "reflTwo")
	w.c.Configure(t, ns, map[string]any{"reflection_distill": true})
	if _, err := w.tc.Observe(ctx, ns, client.ObserveRequest{Identity: client.Identity{UserID: "alice", SessionID: "s1"},
		Turns: turns("How do I make a meringue?", "Whisk egg whites with sugar, then bake at 100 °C for an hour.", "It worked, thanks!")}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the session's outcome label", func() bool {
		o, _ := reflectionLabel(t, ctx, pool, org, ns)
		return o != ""
	})
	time.Sleep(time.Second) // more passes of both processes over the labelled session
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Fatalf("%d model calls for the session over two processes; want 1", calls)
	}
}
