package faults

import (
	"context"
	"net/http"
	"testing"
	"time"

	typed "github.com/loomplane/loom/client"

	"github.com/loomplane/loom/tests/testenv"
)

// Postgres going away under concurrent writers: every write either answered 200 and is
// durable with its revision, data key and outbox record, or answered a retryable 503
// POSTGRES_UNAVAILABLE (never a 500) and left nothing. Once Postgres is back, writes
// succeed again and the namespace's seqs have no gap.
func TestPostgresDownIs503AndNeverHalfWritten(t *testing.T) {
	c := client(t, nil)
	ns := testenv.Unique(t, "pgdown")
	c.Set(t, ns, "before", "written before Postgres went away")
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			env.Stack.Postgres.Restart(context.Background())
		}
	})

	writers := testenv.StartWriters(t, c, ns, "written while Postgres stops", 4)
	writers.WaitFor(t, 20)
	if err := env.Stack.Postgres.Stop(); err != nil {
		t.Fatal(err)
	}
	// While it is down, every call that needs Postgres answers the retryable 503.
	for _, call := range testenv.MemoryCalls(ns) {
		if r := c.Call(t, call); !r.Retryable503(t, "POSTGRES_UNAVAILABLE") {
			t.Fatalf("%s %s with Postgres down: %d %s", call.Method, call.Path, r.Status, r.Body)
		}
	}
	if err := env.Stack.Postgres.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	restarted = true
	testenv.Eventually(t, 30*time.Second, "a write to succeed after the restart", func() bool {
		_, err := c.Typed(t).Set(context.Background(), ns, "after", typed.SetRequest{Value: "written after the restart"})
		return err == nil
	})
	answers := writers.Stop()

	pool := env.PG(t)
	ok, refused := 0, 0
	for _, a := range answers {
		switch {
		case a.Status == http.StatusOK:
			ok++
			n := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_revisions r
				JOIN loom.revision_keys k USING (org, namespace, seq)
				WHERE r.org = $1 AND r.namespace = $2 AND r.memory_key = (SELECT loom.key_ref($1, $3)) AND r.version = $4`, org, ns, a.Key, a.Version)
			if n != 1 {
				t.Fatalf("write %s answered 200 at version %s but its revision is not durable (%d rows)", a.Key, a.Version, n)
			}
		case a.Status == http.StatusServiceUnavailable && a.Code == "POSTGRES_UNAVAILABLE":
			refused++
		case a.Status == http.StatusServiceUnavailable && (a.Code == "ADMISSION_CONTENDED" || a.Code == "PROJECTION_BEHIND"):
			// Four writers of near-identical values are each other's peers, with no
			// projector running: contention is the retryable answer, not a failure.
		default:
			t.Fatalf("write %s answered %d %s: want 200 or a retryable 503", a.Key, a.Status, a.Code)
		}
	}
	if refused == 0 {
		t.Fatal("no write met the outage: the test did not test it")
	}
	// Nothing half-written: the generation counts exactly the committed revisions (a
	// write's own and the copies its verdict made of its peers), every revision has
	// its data key and its outbox record, and every key's head is its latest revision.
	gen := testenv.Generation(t, pool, org, ns)
	revs := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2`, org, ns)
	keys := testenv.Int(t, pool, `SELECT count(*) FROM loom.revision_keys WHERE org = $1 AND namespace = $2`, org, ns)
	maxSeq := testenv.Int(t, pool, `SELECT coalesce(max(seq), 0) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2`, org, ns)
	heads := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_current WHERE org = $1 AND namespace = $2`, org, ns)
	keysWritten := testenv.Int(t, pool, `SELECT count(DISTINCT (agent, user_id, session_id, memory_key)) FROM loom.memory_revisions
		WHERE org = $1 AND namespace = $2`, org, ns)
	headsAtLatest := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_current h WHERE org = $1 AND namespace = $2
		AND seq = (SELECT max(seq) FROM loom.memory_revisions r WHERE r.org = h.org AND r.namespace = h.namespace
			AND r.agent = h.agent AND r.user_id = h.user_id AND r.session_id = h.session_id AND r.memory_key = h.memory_key)`, org, ns)
	outbox := testenv.Int(t, pool, `SELECT count(*) FROM loom.outbox WHERE org = $1 AND namespace = $2`, org, ns)
	if gen != revs || revs != keys || revs != maxSeq || outbox != revs {
		t.Fatalf("generation %d, revisions %d, data keys %d, max seq %d, outbox %d: want all equal (no relay running)",
			gen, revs, keys, maxSeq, outbox)
	}
	if heads != keysWritten || headsAtLatest != heads {
		t.Fatalf("%d heads, %d keys in the journal, %d heads at their key's latest revision: want all equal", heads, keysWritten, headsAtLatest)
	}
	t.Logf("%d writes committed, %d refused with 503 during the outage", ok, refused)
}
