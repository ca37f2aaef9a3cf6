package workers

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/tests/testenv"
)

// An org whose model calls are held (PUT /v1/orgs/self/model-calls) is skipped by the
// conflict resolver: an update written while held stays owed, unjudged, with no
// attempt spent and no model call made, however many passes run; released, the next
// passes judge it and the older row retires behind the newer.
func TestResolverSkipsAHeldOrgAndJudgesOnRelease(t *testing.T) {
	const org = "heldjudge"
	w := startWorkers(t, org, []string{resolverWorker}, nil)
	judge := newMoveJudge(w.srv)
	// The resolver's queue is the deployment's: count only this test's prompts.
	berlinCalls := func() int {
		n := 0
		for _, p := range judge.calls() {
			if p.newValue == "alice's home city is Berlin" {
				n++
			}
		}
		return n
	}
	ctx := context.Background()
	if h, err := w.tc.SetModelCalls(ctx, true); err != nil || !h.Held {
		t.Fatalf("hold: %+v, %v", h, err)
	}
	t.Cleanup(func() { w.tc.SetModelCalls(context.Background(), false) })
	alice := client.Identity{UserID: "alice"}
	ns := testenv.Unique(t, "held-judge")
	w.c.Configure(t, ns, map[string]any{"conflict_policy": "auto_reinforce"})
	set(t, w.tc, ns, "home", "alice's home city is Lisbon", alice)
	set(t, w.tc, ns, "drink", "alice drinks green tea every morning", alice)
	if a := set(t, w.tc, ns, "residence", "alice's home city is Berlin", alice); a.Verdict != "new" {
		// Below the conflict threshold: only the resolver's floor marks it.
		t.Fatalf("the update's verdict is %s; the test needs its peer under LOOM_CONFLICT_THRESHOLD", a.Verdict)
	}

	pool := env.PG(t)
	owed := func() int64 {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.worker_items WHERE worker = $1 AND org = $2 AND namespace = $3
			AND state = 'owed' AND attempts = 0`, resolverWorker, org, ns)
	}
	testenv.Eventually(t, 60*time.Second, "the update queued for the resolver", func() bool { return owed() >= 1 })
	// Two pass ends after the update was owed: the second pass began after it was.
	op := env.Operator(t, w.url)
	lastRun := func() time.Time {
		pass, _ := op.Do(t, http.MethodGet, "/v1/health", nil).JSON(t)["passes"].(map[string]any)[resolverWorker].(map[string]any)
		at, _ := time.Parse(time.RFC3339Nano, stringOf(pass["last_run"]))
		return at
	}
	for i := 0; i < 2; i++ {
		mark := time.Now()
		testenv.Eventually(t, 60*time.Second, "a resolver pass to end", func() bool { return lastRun().After(mark) })
	}
	if n := berlinCalls(); n != 0 {
		t.Fatalf("%d model calls for the held org's rows; want none", n)
	}
	if n := owed(); n < 1 {
		t.Fatal("the held org's update is no longer owed with no attempt spent")
	}
	if home := get(t, w.tc, ns, "home", alice); home.Status != "active" {
		t.Fatalf("while held the older row is %s; want it left active, unjudged", home.Status)
	}

	if h, err := w.tc.SetModelCalls(ctx, false); err != nil || h.Held {
		t.Fatalf("release: %+v, %v", h, err)
	}
	drained(t, pool, resolverWorker, org)
	home, residence := get(t, w.tc, ns, "home", alice), get(t, w.tc, ns, "residence", alice)
	if home.Status != "superseded" || home.SupersededBy != residence.MemoryID {
		t.Fatalf("after the release the older row is %s behind %q; want superseded behind %s", home.Status, home.SupersededBy, residence.MemoryID)
	}
	if n := berlinCalls(); n != 1 {
		t.Fatalf("%d model calls after the release; want the update's one", n)
	}
}

func stringOf(v any) string { s, _ := v.(string); return s }
