package workers

import (
	"context"
	"net/http"
	"slices"
	"strings"
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

// A pair on the namespace's conflict allowlist is not judged by the resolver: an
// update written while the org's model calls are held, then listed with the row it
// updates, is released to the resolver, which sends the pair to no model and retires
// nothing (the same update unlisted retires the older row:
// TestResolverSkipsAHeldOrgAndJudgesOnRelease).
func TestResolverSkipsAnAllowlistedPair(t *testing.T) {
	const org = "allowjudge"
	w := startWorkers(t, org, []string{resolverWorker}, nil)
	judge := newMoveJudge(w.srv)
	ctx := context.Background()
	if h, err := w.tc.SetModelCalls(ctx, true); err != nil || !h.Held {
		t.Fatalf("hold: %+v, %v", h, err)
	}
	t.Cleanup(func() { w.tc.SetModelCalls(context.Background(), false) })
	alice := client.Identity{UserID: "alice"}
	ns := testenv.Unique(t, "allow-judge")
	w.c.Configure(t, ns, map[string]any{"conflict_policy": "auto_reinforce"})
	home := set(t, w.tc, ns, "home", "alice's home city is Lisbon", alice)
	set(t, w.tc, ns, "drink", "alice drinks green tea every morning", alice)
	residence := set(t, w.tc, ns, "residence", "alice's home city is Berlin", alice)
	if residence.Verdict != "new" {
		t.Fatalf("the update's verdict is %s; the test needs its peer under LOOM_CONFLICT_THRESHOLD", residence.Verdict)
	}
	body := []byte(`{"memory_ids": ["` + home.MemoryID + `", "` + residence.MemoryID + `"]}`)
	if r := w.c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/conflict-allowlist", body); r.Status != http.StatusOK {
		t.Fatalf("allowlist.add: %d %s", r.Status, r.Body)
	}
	if h, err := w.tc.SetModelCalls(ctx, false); err != nil || h.Held {
		t.Fatalf("release: %+v, %v", h, err)
	}
	drained(t, env.PG(t), resolverWorker, org)
	for _, p := range judge.calls() {
		if p.newValue == "alice's home city is Berlin" && slices.ContainsFunc(p.peers, func(v string) bool { return strings.Contains(v, "Lisbon") }) {
			t.Fatalf("the allowlisted pair was sent to the model: %+v", p)
		}
	}
	if h := get(t, w.tc, ns, "home", alice); h.Status != "active" || len(h.ConflictWith) != 0 {
		t.Fatalf("the listed older row is %s, flagged against %v; want it left active, unflagged", h.Status, h.ConflictWith)
	}
}
