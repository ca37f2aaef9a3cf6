package workers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/tests/testenv"
)

// journalOps are a memory's revisions' ops, oldest first.
func journalOps(t testing.TB, org, ns, memoryID string) []string {
	t.Helper()
	var ops string
	if err := env.PG(t).QueryRow(context.Background(), `SELECT string_agg(op, ' ' ORDER BY seq) FROM loom.memory_revisions
		WHERE org = $1 AND namespace = $2 AND memory_id = $3::uuid`, org, ns, memoryID).Scan(&ops); err != nil {
		t.Fatal(err)
	}
	return strings.Fields(ops)
}

// An update two writes apart (the user's home city, then a row about something
// else, then the new city under another key) is judged once: under auto_reinforce the
// older row retires behind the newer, recorded as memory.auto_supersede; under
// manual_review both are only flagged. An Undo restores the retired row, and a second
// judgement of the winner leaves the pair alone. A replay of the resolver's group
// judges nothing twice.
func TestResolverRetiresAnUpdateTwoWritesApartAndOnlyFlagsUnderManualReview(t *testing.T) {
	const org = "judge"
	start := time.Now().UTC()
	w := startWorkers(t, org, []string{resolverWorker}, nil)
	judge := newMoveJudge(w.srv)
	pool := env.PG(t)
	alice := client.Identity{UserID: "alice"}
	namespaces := map[string]string{}
	for _, policy := range []string{"auto_reinforce", "manual_review"} {
		ns := testenv.Unique(t, strings.ReplaceAll(policy, "_", "-"))
		namespaces[policy] = ns
		w.c.Configure(t, ns, map[string]any{"conflict_policy": policy})
		set(t, w.tc, ns, "home", "alice's home city is Lisbon", alice)
		set(t, w.tc, ns, "drink", "alice drinks green tea every morning", alice)
		if a := set(t, w.tc, ns, "residence", "alice's home city is Berlin", alice); a.Verdict != "new" {
			// Below the conflict threshold: only the resolver's floor marks it.
			t.Fatalf("the update's verdict is %s; the test needs its peer under LOOM_CONFLICT_THRESHOLD", a.Verdict)
		}
	}
	drained(t, pool, resolverWorker, org)

	auto := namespaces["auto_reinforce"]
	old, upd := get(t, w.tc, auto, "home", alice), get(t, w.tc, auto, "residence", alice)
	if old.Status != "superseded" || old.SupersededBy != upd.MemoryID || upd.Status != "active" {
		t.Fatalf("auto_reinforce: the older row is %s behind %q, the newer %s; want superseded behind %s, active",
			old.Status, old.SupersededBy, upd.Status, upd.MemoryID)
	}
	if ops := journalOps(t, org, auto, old.MemoryID); ops[len(ops)-1] != "memory.auto_supersede" {
		t.Fatalf("the retirement's record: the row's journal is %v", ops)
	}
	manual := namespaces["manual_review"]
	mo, mu := get(t, w.tc, manual, "home", alice), get(t, w.tc, manual, "residence", alice)
	if mo.Status != "conflicted" || mu.Status != "conflicted" || mo.SupersededBy != "" ||
		len(mo.ConflictWith) != 1 || mo.ConflictWith[0] != mu.MemoryID || len(mu.ConflictWith) != 1 || mu.ConflictWith[0] != mo.MemoryID {
		t.Fatalf("manual_review flags both rows for review, retiring none: %+v / %+v", mo, mu)
	}
	// One call per judged row: the update's, in each namespace (the first rows had no
	// peer at the floor when written, the tea row none either).
	if n := len(judge.calls()); n != 2 {
		t.Fatalf("%d calls; want one per judged row, 2", n)
	}

	// The Undo restores the retired row and names its winner.
	undo, err := w.tc.Unsupersede(context.Background(), auto, "home", alice)
	if err != nil || !undo.Written || undo.Status != "active" || undo.UndidRetirementBy != upd.MemoryID {
		t.Fatalf("unsupersede: %+v %v", undo, err)
	}
	if _, err := w.tc.Unsupersede(context.Background(), auto, "home", alice); !isCode(err, "PRECONDITION_FAILED") {
		t.Fatalf("a second Undo has nothing to undo: %v", err)
	}

	// A replay of the group from the test's start queues every write again: nothing
	// is judged twice.
	calls := len(judge.calls())
	w.replay(start.Format(time.RFC3339Nano))
	drained(t, pool, resolverWorker, org)
	if n := len(judge.calls()); n != calls {
		t.Fatalf("the replay made %d calls; want none", n-calls)
	}
	// The winner owed again (its stamp gone) is judged again: the pair the Undo
	// restored is left alone, and no call is paid for it.
	if _, err := pool.Exec(context.Background(), `DELETE FROM loom.worker_items WHERE worker = $1 AND org = $2 AND namespace = $3`,
		resolverWorker, org, auto); err != nil {
		t.Fatal(err)
	}
	w.replay(start.Format(time.RFC3339Nano))
	drained(t, pool, resolverWorker, org)
	if o := get(t, w.tc, auto, "home", alice); o.Status != "active" {
		t.Fatalf("after the Undo, a second judgement retired the row again: %s", o.Status)
	}
	for _, p := range judge.calls()[calls:] {
		for _, peer := range p.peers {
			if strings.Contains(peer, "Lisbon") {
				t.Fatalf("the undone pair was sent to the model again: %+v", p)
			}
		}
	}
}

func isCode(err error, code client.Code) bool {
	e, ok := client.AsError(err)
	return ok && e.Code == code
}

// memory.restore (:restore) of a row the resolver retired is an Undo, as the seed has
// it (memory-architecture, "The conflict resolver"): it writes the loom.conflict_undos
// record, so the pair is not judged again, and names the winner it undid.
func TestRestoringAResolverRetirementRecordsItsUndo(t *testing.T) {
	const org = "judge-restore"
	w := startWorkers(t, org, []string{resolverWorker}, nil)
	newMoveJudge(w.srv)
	pool := env.PG(t)
	alice := client.Identity{UserID: "alice"}
	ns := testenv.Unique(t, "restore-undo")
	w.c.Configure(t, ns, map[string]any{"conflict_policy": "auto_reinforce"})
	set(t, w.tc, ns, "home", "alice's home city is Lisbon", alice)
	set(t, w.tc, ns, "drink", "alice drinks green tea every morning", alice)
	set(t, w.tc, ns, "residence", "alice's home city is Berlin", alice)
	drained(t, pool, resolverWorker, org)
	old, upd := get(t, w.tc, ns, "home", alice), get(t, w.tc, ns, "residence", alice)
	if old.Status != "superseded" || old.SupersededBy != upd.MemoryID {
		t.Fatalf("the resolver did not retire the older row: %+v", old)
	}
	// The retirement is the resolver's act, not the earlier writer's (issue 33 #2).
	if old.Actor != "worker:conflict-resolver" {
		t.Fatalf("the retired copy's actor is %q; want worker:conflict-resolver", old.Actor)
	}
	restored, err := w.tc.Restore(context.Background(), ns, "home", alice)
	if err != nil || !restored.Written || restored.Status != "active" || restored.UndidRetirementBy != upd.MemoryID {
		t.Fatalf("restore of a resolver retirement: %+v %v", restored, err)
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.conflict_undos WHERE org = $1 AND namespace = $2
		AND loser_id = $3::uuid AND winner_id = $4::uuid`, org, ns, old.MemoryID, upd.MemoryID); n != 1 {
		t.Fatalf("%d Undo records of the pair after :restore; want 1, so the resolver leaves it alone", n)
	}
}
