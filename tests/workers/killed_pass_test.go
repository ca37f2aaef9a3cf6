package workers

import (
	"context"
	"maps"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// A pass killed mid-batch does nothing twice and loses nothing. Three sessions of one
// namespace owe a digest before any workers process runs, so one session_digest pass
// claims the three observe records as one batch and digests the sessions in order: the
// first is digested, the model holds the second's call, and the process's context is
// cancelled there (the third not begun). Another process then finishes the batch: the
// first session is not asked again, the second and third are digested once each (a
// window digested twice would count its turns twice), and every record's item is done.
// A replay of the pass's group over the test's records then asks nothing and writes
// nothing: the items are the records' stamps, the digests' window ends the sessions'.
func TestAPassKilledMidBatchDoesNothingTwice(t *testing.T) {
	const org = "killedpass"
	w := startWorkers(t, org, nil, func(c *config.Config) { c.Workers.SessionDigest.Enabled = false })
	pool := env.PG(t)
	called, inSecond := scriptKilledDigests(w.srv)
	ctx := context.Background()
	ns := testenv.Unique(t, "killed")
	start := time.Now().UTC()
	for _, s := range []struct{ session, topic string }{{"s1", "sourdough"}, {"s2", "kayak"}, {"s3", "chess"}} {
		if _, err := w.tc.Observe(ctx, ns, client.ObserveRequest{Identity: client.Identity{UserID: "alice", SessionID: s.session},
			Turns: turns("Tell me about the "+s.topic, "What about it?", "How to start with a "+s.topic)}); err != nil {
			t.Fatal(err)
		}
	}
	digest := func(session string) map[string]any {
		r := w.c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/sessions/"+session+"/digest", nil)
		if r.Status != http.StatusOK {
			return nil
		}
		return r.JSON(t)
	}
	items := func(state string) int64 {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.worker_items WHERE worker = 'session_digest' AND org = $1 AND namespace = $2
			AND state = $3`, org, ns, state)
	}

	// The first process: killed inside the second session's model call.
	_, _, kill := env.Serve(t, []string{"workers"}, withModel(w.srv, nil, withSessionDigests))
	select {
	case <-inSecond:
	case <-time.After(60 * time.Second):
		t.Fatal("the pass never reached the second session")
	}
	kill()
	if digest("s1") == nil || digest("s2") != nil || digest("s3") != nil || items("owed") != 3 || items("done") != 0 {
		t.Fatalf("after the kill: digests s1 %v s2 %v s3 %v, items owed %d done %d; want s1 alone digested and the batch's three records owed",
			digest("s1"), digest("s2"), digest("s3"), items("owed"), items("done"))
	}

	// Another process finishes the batch.
	_, _, stop := env.Serve(t, []string{"workers"}, withModel(w.srv, nil, withSessionDigests))
	drained(t, pool, "session_digest", org)
	for _, s := range []string{"s1", "s2", "s3"} {
		if d := digest(s); d == nil || d["turns"] != float64(3) {
			t.Fatalf("the digest of %s: %v; want one digest of its 3 turns", s, d)
		}
	}
	want := map[string]int{"sourdough": 1, "kayak": 2, "chess": 1} // kayak: the killed call, then its digest
	if got := called(); !maps.Equal(got, want) || items("done") != 3 || items("owed") != 0 {
		t.Fatalf("model calls %v, items done %d owed %d; want calls %v and the three records done", got, items("done"), items("owed"), want)
	}
	history := testenv.Int(t, pool, `SELECT count(*) FROM loom.session_summaries WHERE org = $1 AND namespace = $2`, org, ns)
	lastDone := func() int64 {
		return testenv.Int(t, pool, `SELECT (extract(epoch FROM max(done_at)) * 1e6)::bigint FROM loom.worker_items
			WHERE worker = 'session_digest' AND org = $1 AND namespace = $2`, org, ns)
	}
	stamped := lastDone()

	// A replay over the test's records asks nothing and writes nothing.
	stop()
	resetGroup(t, "session_digest", start.Format(time.RFC3339Nano))
	env.Serve(t, []string{"workers"}, withModel(w.srv, nil, withSessionDigests))
	drained(t, pool, "session_digest", org)
	if got := called(); !maps.Equal(got, want) || items("done") != 3 ||
		testenv.Int(t, pool, `SELECT count(*) FROM loom.session_summaries WHERE org = $1 AND namespace = $2`, org, ns) != history {
		t.Fatalf("after the replay: model calls %v, items done %d; want no call, no digest and no item more", got, items("done"))
	}
	if again := lastDone(); again != stamped {
		t.Fatalf("after the replay the items were done again (last done %d µs, was %d): the replay worked the namespace again", again, stamped)
	}
}

// scriptKilledDigests answers the session_digest calls of the three sessions, holding
// the first call of the second (kayak) until its process gives up; inSecond is closed
// when that call arrives, and called counts the calls by session topic.
func scriptKilledDigests(srv *llmtest.Server) (called func() map[string]int, inSecond <-chan struct{}) {
	var mu sync.Mutex
	calls := map[string]int{}
	held := make(chan struct{})
	srv.Script(func(r llmtest.ChatRequest) llmtest.Reply {
		if r.SchemaName != "session_digest" {
			return llmtest.Status(500, "unscripted")
		}
		for _, topic := range []string{"sourdough", "kayak", "chess"} {
			if !r.Contains(topic) {
				continue
			}
			mu.Lock()
			calls[topic]++
			first := calls[topic] == 1
			mu.Unlock()
			reply := llmtest.JSON(map[string]any{"digest": "They talked about the " + topic})
			if topic == "kayak" && first {
				close(held)
				return reply.After(time.Hour) // held until the process gives up
			}
			return reply
		}
		return llmtest.Status(500, "another test's session")
	})
	called = func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return map[string]int{"sourdough": calls["sourdough"], "kayak": calls["kayak"], "chess": calls["chess"]}
	}
	return called, held
}
