package workers

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// withSessionDigests turns the session_digest pass on: a session owes a digest after
// three new turns, and passes run every 100 ms.
func withSessionDigests(c *config.Config) {
	c.Workers.SessionDigest.Enabled = true
	c.Workers.SessionDigest.MinTurns = 3
	c.Workers.SessionDigest.Idle = time.Hour
	c.Workers.SessionDigest.Interval = 100 * time.Millisecond
}

// scriptedDigester answers the session_digest pass's calls: 503 while down, else a
// digest naming the window's last turn, and counts the calls it answered.
type scriptedDigester struct {
	mu       sync.Mutex
	down     bool
	answered []llmtest.ChatRequest
}

func (d *scriptedDigester) reply(r llmtest.ChatRequest) llmtest.Reply {
	if r.SchemaName != "session_digest" {
		return llmtest.Status(500, "unscripted")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down {
		return llmtest.Status(503, "the provider is down")
	}
	// The pass digests every owed session of the deployment, other tests' too: only
	// this conversation's windows are counted.
	if !r.Contains("trip to Lisbon") {
		return llmtest.JSON(map[string]any{"digest": "another conversation"})
	}
	d.answered = append(d.answered, r)
	digest := "Ana plans a trip to Lisbon"
	if r.Contains("arrives on Tuesday") {
		digest += "; she arrives on Tuesday"
	}
	return llmtest.JSON(map[string]any{"digest": digest})
}

func (d *scriptedDigester) setDown(down bool) {
	d.mu.Lock()
	d.down = down
	d.mu.Unlock()
}

func (d *scriptedDigester) calls() []llmtest.ChatRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]llmtest.ChatRequest(nil), d.answered...)
}

func turns(texts ...string) []client.ObservedTurn {
	out := make([]client.ObservedTurn, len(texts))
	for i, s := range texts {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		out[i] = client.ObservedTurn{Role: role, Content: s}
	}
	return out
}

// Turns observed in a session get a digest by one model call per window, kept sealed,
// read back by the session's digest route within the token's scope; an outage leaves
// the digest owed until the provider answers; the next window's call reads the digest
// so far and its digest replaces it; an erasure of the user takes the digests.
func TestSessionDigestOfObservedTurns(t *testing.T) {
	const org = "sessiondigest"
	w := startWorkers(t, org, nil, withSessionDigests)
	d := &scriptedDigester{down: true}
	w.srv.Script(d.reply)
	ctx := context.Background()
	pool := env.PG(t)
	ns := testenv.Unique(t, "digest")
	digestPath := "/v1/namespaces/" + ns + "/sessions/s1/digest"

	alice := client.Identity{UserID: "alice", SessionID: "s1"}
	if _, err := w.tc.Observe(ctx, ns, client.ObserveRequest{Identity: alice,
		Turns: turns("I want to plan a trip to Lisbon", "When would you like to go?", "Next month, for a week")}); err != nil {
		t.Fatal(err)
	}
	// The provider is down: the pass asks, gets nothing, and the digest stays owed.
	testenv.Eventually(t, 30*time.Second, "the pass to ask the provider that is down", func() bool {
		for _, r := range w.srv.Chats() {
			if r.SchemaName == "session_digest" {
				return true
			}
		}
		return false
	})
	if r := w.c.Do(t, http.MethodGet, digestPath, nil); r.Status != http.StatusNotFound {
		t.Fatalf("the digest while the provider is down: %d %s, want 404", r.Status, r.Body)
	}
	d.setDown(false)
	var first map[string]any
	testenv.Eventually(t, 30*time.Second, "the session's digest", func() bool {
		r := w.c.Do(t, http.MethodGet, digestPath, nil)
		if r.Status == http.StatusOK {
			first = r.JSON(t)
		}
		return r.Status == http.StatusOK
	})
	if first["digest"] != "Ana plans a trip to Lisbon" || first["window_end"] != float64(2) || first["turns"] != float64(3) || first["user_id"] != "alice" {
		t.Fatalf("the first digest: %v", first)
	}
	calls := d.calls()
	if len(calls) != 1 || !calls[0].Contains("Next month, for a week") || !calls[0].Contains("(none)") {
		t.Fatalf("the first window took %d answered calls, want one reading its turns: %+v", len(calls), calls)
	}
	// context.pack's session layer carries the digest, cited s:<session>.
	if r := w.c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/context:pack", []byte(`{"session_id": "s1", "user_id": "alice", "query": "trip"}`)); r.Status != http.StatusOK ||
		!strings.Contains(string(r.Body), "s:s1") || !strings.Contains(string(r.Body), "Ana plans a trip to Lisbon") {
		t.Fatalf("context.pack of the session: %d %s", r.Status, r.Body)
	}
	// Sealed at rest: the row holds neither the text nor its data key in the clear.
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.session_summaries WHERE org = $1 AND namespace = $2
		AND position(convert_to('Lisbon', 'UTF8') in sealed) = 0 AND length(data_key) > 32`, org, ns); n != 1 {
		t.Fatalf("%d sealed digest rows, want 1", n)
	}
	// A token bound to bob reads no digest of alice's; one bound to alice does.
	bob := testenv.NewClient(w.url, env.Token(t, w.n, auth.NewToken{Org: org, Role: auth.RoleReader, ReadUserID: "bob"}))
	if r := bob.Do(t, http.MethodGet, digestPath, nil); r.Status != http.StatusNotFound {
		t.Fatalf("bob's token reading alice's digest: %d %s, want 404", r.Status, r.Body)
	}
	mine := testenv.NewClient(w.url, env.Token(t, w.n, auth.NewToken{Org: org, Role: auth.RoleReader, ReadUserID: "alice"}))
	if r := mine.Do(t, http.MethodGet, digestPath, nil); r.Status != http.StatusOK {
		t.Fatalf("alice's token reading her digest: %d %s", r.Status, r.Body)
	}

	// The next window: one call over the digest so far and the turns since; its digest
	// replaces the first.
	if _, err := w.tc.Observe(ctx, ns, client.ObserveRequest{Identity: alice,
		Turns: turns("Ana arrives on Tuesday", "Shall I book the hotel?", "Yes, near the river")}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the second window's digest", func() bool {
		r := w.c.Do(t, http.MethodGet, digestPath, nil)
		return r.Status == http.StatusOK && r.JSON(t)["window_end"] == float64(5)
	})
	calls = d.calls()
	if len(calls) != 2 || !calls[1].Contains("Ana plans a trip to Lisbon") || !calls[1].Contains("arrives on Tuesday") || calls[1].Contains("Next month, for a week") {
		t.Fatalf("the second window: %d answered calls, want two, the second over the digest so far and the new turns only: %+v", len(calls), calls)
	}
	if r := w.c.Do(t, http.MethodGet, digestPath, nil).JSON(t); r["digest"] != "Ana plans a trip to Lisbon; she arrives on Tuesday" || r["turns"] != float64(6) {
		t.Fatalf("the second digest: %v", r)
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.session_summaries WHERE org = $1 AND namespace = $2`, org, ns); n != 1 {
		t.Fatalf("%d digest rows of the session, want the newest alone", n)
	}

	// An erasure of alice takes her digests: the census counts none, the route has none.
	view := w.c.Erase(t, map[string]any{"user_id": "alice"})
	census, _ := view["census"].(map[string]any)
	if n, ok := census["pg:loom.session_summaries"]; !ok || n != float64(0) {
		t.Fatalf("the census of loom.session_summaries: %v (present %t)", n, ok)
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.session_summaries WHERE org = $1`, org); n != 0 {
		t.Fatalf("%d digest rows after the erasure", n)
	}
	if r := w.c.Do(t, http.MethodGet, digestPath, nil); r.Status != http.StatusNotFound {
		t.Fatalf("the digest after the erasure: %d %s, want 404", r.Status, r.Body)
	}
}

// Without a model provider the pass does not run: turns are kept, no session is
// digested, and nothing fails.
func TestSessionDigestWithoutAProvider(t *testing.T) {
	const org = "sessiondigestnone"
	n, url, stop := env.Serve(t, []string{"api", "workers"}, withSessionDigests)
	defer stop()
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	ns := testenv.Unique(t, "digest")
	ctx := context.Background()
	if _, err := c.Typed(t).Observe(ctx, ns, client.ObserveRequest{Identity: client.Identity{UserID: "alice", SessionID: "s1"},
		Turns: turns("one", "two", "three", "four")}); err != nil {
		t.Fatal(err)
	}
	if n.Workers.Enabled("session_digest") {
		t.Fatal("the session_digest pass runs without a provider")
	}
	if r := c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/sessions/s1/digest", nil); r.Status != http.StatusNotFound ||
		!strings.Contains(string(r.Body), "no digest") {
		t.Fatalf("a session's digest without a provider: %d %s, want 404", r.Status, r.Body)
	}
	rec, err := c.Typed(t).Recall(ctx, ns, client.RecallRequest{Query: "three"})
	if err != nil || len(rec.Hits) == 0 {
		t.Fatalf("recall without a provider: %+v, %v", rec, err)
	}
}

// Two processes run the pass over two owed sessions, the first of which takes its
// model call five seconds: the process that holds it reaches the second session with
// a list read before the other process digested it, and reads the digest again under
// the session's lock, so each window costs one model call, not one a process (the
// second call would also count the window's turns twice in the digest's turns).
func TestSessionDigestTwoProcessesCallTheModelOncePerWindow(t *testing.T) {
	const org = "sessiondigesttwo"
	off := func(c *config.Config) { c.Workers.SessionDigest.Enabled = false }
	w := startWorkers(t, org, nil, off)
	var mu sync.Mutex
	calls := map[string]int{}
	w.srv.Script(func(r llmtest.ChatRequest) llmtest.Reply {
		if r.SchemaName != "session_digest" {
			return llmtest.Status(500, "unscripted")
		}
		for _, topic := range []string{"sourdough", "kayak"} {
			if r.Contains(topic) {
				mu.Lock()
				calls[topic]++
				mu.Unlock()
				reply := llmtest.JSON(map[string]any{"digest": "They talked about the " + topic})
				if topic == "sourdough" {
					return reply.After(5 * time.Second)
				}
				return reply
			}
		}
		return llmtest.JSON(map[string]any{"digest": "another conversation"})
	})
	ctx := context.Background()
	ns := testenv.Unique(t, "digestTwo")
	// Both sessions owe a digest before either process runs: the first (the slow one)
	// is first in both processes' lists.
	for _, s := range []struct{ session, topic string }{{"s1", "sourdough"}, {"s2", "kayak"}} {
		if _, err := w.tc.Observe(ctx, ns, client.ObserveRequest{Identity: client.Identity{UserID: "alice", SessionID: s.session},
			Turns: turns("Tell me about the "+s.topic, "What about it?", "How to start with a "+s.topic)}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		env.Serve(t, []string{"workers"}, withModel(w.srv, nil, withSessionDigests))
	}
	for _, s := range []string{"s1", "s2"} {
		path := "/v1/namespaces/" + ns + "/sessions/" + s + "/digest"
		testenv.Eventually(t, 60*time.Second, "the digest of "+s, func() bool { return w.c.Do(t, http.MethodGet, path, nil).Status == http.StatusOK })
		if d := w.c.Do(t, http.MethodGet, path, nil).JSON(t); d["turns"] != float64(3) {
			t.Fatalf("the digest of %s: %v, want 3 turns", s, d)
		}
	}
	// The slow call's process reaches the second session after its call: its pass ends,
	// and its item of the namespace is stamped done, only once it has (every item of a
	// pass is owed until the pass over its namespace ends).
	pool := env.PG(t)
	testenv.Eventually(t, 60*time.Second, "both processes' passes over the namespace to end", func() bool {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.worker_items WHERE worker = 'session_digest' AND org = $1 AND namespace = $2
			AND state = 'owed'`, org, ns) == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if calls["sourdough"] != 1 || calls["kayak"] != 1 {
		t.Fatalf("model calls per session over two processes: %v; want one each", calls)
	}
}
