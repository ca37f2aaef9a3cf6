package workers

import (
	"context"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/tests/testenv"
)

// A namespace namespace.delete soft-deleted is not judged: the resolver's rows in it
// stay owed while another namespace of the org, owed later, is judged; registered
// again, it is judged (issue 33: "a namespace soft-deleted is neither read nor
// judged and comes back on re-register").
func TestASoftDeletedNamespaceIsNotJudgedUntilRegisteredAgain(t *testing.T) {
	const org = "judge-soft"
	ctx := context.Background()
	w := startWorkers(t, org, []string{resolverWorker}, nil)
	newMoveJudge(w.srv)
	pool := env.PG(t)
	alice := client.Identity{UserID: "alice"}
	// owed counts a namespace's resolver rows still owed, and all of them.
	owed := func(ns string) (owed, all int64) {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.worker_items WHERE worker = $1 AND org = $2 AND namespace = $3 AND state = 'owed'`, resolverWorker, org, ns),
			testenv.Int(t, pool, `SELECT count(*) FROM loom.worker_items WHERE worker = $1 AND org = $2 AND namespace = $3`, resolverWorker, org, ns)
	}
	owes := func(ns, memoryID string) bool {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.worker_items WHERE worker = $1 AND org = $2 AND namespace = $3 AND memory_id = $4::uuid AND state = 'owed'`,
			resolverWorker, org, ns, memoryID) == 1
	}
	// The org's model calls held, so nothing is claimed before the namespace is gone.
	if _, err := pool.Exec(ctx, `INSERT INTO loom.model_call_holds (org, held_by) VALUES ($1, 'test')`, org); err != nil {
		t.Fatal(err)
	}
	gone := testenv.Unique(t, "soft-judged")
	w.c.Configure(t, gone, map[string]any{"conflict_policy": "auto_reinforce"})
	set(t, w.tc, gone, "home", "alice's home city is Lisbon", alice)
	set(t, w.tc, gone, "drink", "alice drinks green tea every morning", alice)
	berlin := set(t, w.tc, gone, "residence", "alice's home city is Berlin", alice)
	testenv.Eventually(t, 60*time.Second, "the update's judgement to be owed", func() bool { return owes(gone, berlin.MemoryID) })
	if _, err := w.tc.DeleteNamespace(ctx, gone); err != nil {
		t.Fatal(err)
	}
	other := testenv.Unique(t, "soft-judged-other")
	w.c.Configure(t, other, map[string]any{"conflict_policy": "auto_reinforce"})
	set(t, w.tc, other, "home", "alice's office is in Porto", alice)
	otherBerlin := set(t, w.tc, other, "residence", "alice's office is in Madrid", alice)
	testenv.Eventually(t, 60*time.Second, "the other namespace's update to be owed", func() bool { return owes(other, otherBerlin.MemoryID) })
	if _, err := pool.Exec(ctx, `DELETE FROM loom.model_call_holds WHERE org = $1`, org); err != nil {
		t.Fatal(err)
	}
	// Each pass takes the namespaces' owed rows in turns, so the deleted namespace's,
	// owed first, would be taken no later than the other's.
	testenv.Eventually(t, 60*time.Second, "the other namespace to be judged", func() bool {
		o, _ := owed(other)
		return o == 0
	})
	if !owes(gone, berlin.MemoryID) {
		o, all := owed(gone)
		t.Fatalf("the soft-deleted namespace's update was taken (%d of %d rows owed); want it still owed", o, all)
	}

	// Registered again, it is judged: the older city retires behind the newer.
	w.c.Configure(t, gone, map[string]any{"conflict_policy": "auto_reinforce"})
	drained(t, pool, resolverWorker, org)
	old, upd := get(t, w.tc, gone, "home", alice), get(t, w.tc, gone, "residence", alice)
	if old.Status != "superseded" || old.SupersededBy != upd.MemoryID {
		t.Fatalf("after re-registering, the older row is %s behind %q; want superseded behind %s", old.Status, old.SupersededBy, upd.MemoryID)
	}
}
