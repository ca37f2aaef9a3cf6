package e2e

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
	"github.com/loomplane/loom/workers"
)

// queueEnv is a Loom whose deferred extractions go to a topic of the test's own; its
// API process runs no worker, so each test starts and stops the workers it needs.
type queueEnv struct {
	t     *testing.T
	srv   *llmtest.Server
	topic string
	org   string
	ns    string
	mod   func(*config.Config)
	api   *app.Process
	c     *testenv.Client
	tc    *client.Client
}

func newQueueEnv(t *testing.T, mod func(*config.Config)) *queueEnv {
	t.Helper()
	q := &queueEnv{t: t, srv: llmtest.New(t), topic: env.CreateTopic(t, nil), org: testenv.Unique(t, "org"), ns: testenv.Unique(t, "q")}
	q.mod = func(c *config.Config) {
		withProvider(q.srv)(c)
		x := &c.Command.Extraction
		x.QueueEnabled, x.Topic = true, q.topic
		x.Lease, x.Poll, x.RetryBase, x.SessionTimeout, x.Pause = time.Second, 100*time.Millisecond, 100*time.Millisecond, 6*time.Second, time.Minute
		c.Pipeline.ShutdownGrace = 100 * time.Millisecond
		if mod != nil {
			mod(c)
		}
	}
	n, url := env.API(t, func(c *config.Config) { q.mod(c); c.Command.Extraction.QueueEnabled = false })
	q.api = n
	q.c = testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: q.org}))
	q.tc = q.c.Typed(t)
	// The requests table is the deployment's: a request this test leaves open would fall
	// due later and any later test's worker would queue it and call that test's
	// scripted model, which fails on a transcript it was not written for.
	pool := env.PG(t)
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), `DELETE FROM loom.extraction_requests WHERE org = $1`, q.org); err != nil {
			t.Errorf("drop the test's extraction requests: %v", err)
		}
	})
	return q
}

// worker runs a command process with an extraction worker until stop.
func (q *queueEnv) worker(opts ...app.Option) (stop func()) {
	q.t.Helper()
	_, _, stop = env.Serve(q.t, []string{"command"}, q.mod, opts...)
	return stop
}

// enqueue defers a transcript for user and answers its queue_id.
func (q *queueEnv) enqueue(user string, texts ...string) string {
	q.t.Helper()
	yes := true
	a, err := q.tc.FromMessages(context.Background(), q.ns, client.FromMessagesRequest{Identity: client.Identity{UserID: user},
		Messages: messages(texts...), Defer: &yes})
	if err != nil {
		q.t.Fatal(err)
	}
	if !a.Deferred || a.QueueID == "" || a.Status != "pending" || len(a.Facts) != 0 {
		q.t.Fatalf("a deferred request answered %+v", a)
	}
	return a.QueueID
}

func (q *queueEnv) status(id string) *client.Extraction {
	q.t.Helper()
	x, err := q.tc.MyExtraction(context.Background(), id)
	if err != nil {
		q.t.Fatalf("extraction %s: %v", id, err)
	}
	return x
}

func (q *queueEnv) await(id, status string) *client.Extraction {
	q.t.Helper()
	var x *client.Extraction
	testenv.Eventually(q.t, 30*time.Second, "extraction "+id+" "+status, func() bool {
		x = q.status(id)
		// A done request's answer is stored right after the commit that marks it done.
		return x.Status == status && (status != "done" || len(x.Result) > 0)
	})
	return x
}

// revisions counts the committed revisions of a key in the namespace.
func (q *queueEnv) revisions(key string) int64 {
	return testenv.Int(q.t, env.PG(q.t), `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND memory_key = (SELECT loom.key_ref($1, $3))`,
		q.org, q.ns, key)
}

func saying(s string) func(llmtest.ChatRequest) bool {
	return func(r llmtest.ChatRequest) bool { return isExtraction(r) && r.Contains(s) }
}

// A deferred request answers its queue_id at once. The worker that takes it is stopped
// mid-request, and another takes it over once the first one's lease lapses and writes
// it. A worker whose commit's answer is lost stops too: the next one is handed the same
// record, finds the request done, and writes nothing more. Each request's facts are
// written once.
func TestDeferredExtractionIsTakenOverAndWrittenOnce(t *testing.T) {
	q := newQueueEnv(t, nil)
	q.srv.ReplyWhen(saying("Lisbon"), extracted([]said{{"user.home_city", "Lives in Lisbon", 0}}).After(time.Minute),
		extracted([]said{{"user.home_city", "Lives in Lisbon", 0}}))
	first := q.enqueue("alice", "I live in Lisbon.")
	stopA := q.worker()
	testenv.Eventually(t, 30*time.Second, "worker A to ask the provider", func() bool { return len(q.srv.Chats()) == 1 })
	if x := q.status(first); x.Status != "running" || x.LeaseUntil == nil {
		t.Fatalf("while A runs it: %+v", x)
	}
	stopA()
	stopB := q.worker()
	if x := q.await(first, "done"); x.Attempts != 0 || len(x.Result) == 0 {
		t.Fatalf("taken over: %+v", x)
	}
	if n := q.revisions("user.home_city"); n != 1 || len(q.srv.Chats()) != 2 {
		t.Fatalf("%d revisions of user.home_city after %d calls, want 1 after 2", n, len(q.srv.Chats()))
	}
	stopB()

	var once sync.Once
	lost := make(chan struct{})
	faults := command.Faults{AfterCommit: func() error {
		var err error
		once.Do(func() { err = errors.New("the connection dropped right after COMMIT"); close(lost) })
		return err
	}}
	q.srv.ReplyWhen(saying("Porto"), extracted([]said{{"user.birth_city", "Was born in Porto", 0}}))
	second := q.enqueue("alice", "I was born in Porto.")
	stopC := q.worker(app.WithCommandFaults(faults))
	select {
	case <-lost:
	case <-time.After(30 * time.Second):
		t.Fatal("worker C did not commit the second request")
	}
	stopC()
	stopD := q.worker()
	defer stopD()
	testenv.Eventually(t, 30*time.Second, "worker D to be handed every record", func() bool {
		return env.GroupCaughtUp(t, workers.ExtractionGroup, q.topic)
	})
	if x := q.status(second); x.Status != "done" {
		t.Fatalf("the second request: %+v", x)
	}
	if n := q.revisions("user.birth_city"); n != 1 || len(q.srv.Chats()) != 3 {
		t.Fatalf("%d revisions of user.birth_city after %d calls, want 1 after 3", n, len(q.srv.Chats()))
	}
}

// A provider that answers 429 and then recovers loses nothing and spends no attempt;
// while the request waits, search reports pending_extraction for its user's scope and
// for no other. An answer with nothing usable spends one, up to the last, and then
// extraction_retry_mine gives the request one more.
func TestDeferredExtractionRetries(t *testing.T) {
	q := newQueueEnv(t, func(c *config.Config) { c.Command.Extraction.MaxAttempts = 2 })
	ctx := context.Background()
	q.srv.ReplyWhen(saying("Rome"), llmtest.Status(http.StatusTooManyRequests, "Rate limit reached").WithRetryAfter(100*time.Millisecond),
		extracted([]said{{"user.home_city", "Lives in Rome", 0}}))
	q.srv.ReplyWhen(saying("Oslo"), llmtest.Raw("not json"), llmtest.Raw(`{"facts": "none"}`),
		extracted([]said{{"user.work_city", "Works in Oslo", 0}}))
	limited := q.enqueue("alice", "I live in Rome.")
	broken := q.enqueue("bob", "I work in Oslo.")
	for user, want := range map[string]bool{"alice": true, "carol": false} {
		a, err := q.tc.Search(ctx, q.ns, client.SearchRequest{Query: "city", UserID: user})
		if err != nil || a.PendingExtraction != want {
			t.Fatalf("search of %s's scope: pending_extraction %v (%v), want %t", user, a, err, want)
		}
	}
	defer q.worker()()
	if x := q.await(limited, "done"); x.Attempts != 0 {
		t.Fatalf("after a 429: %+v, want done with no attempt spent", x)
	}
	if m, err := q.tc.Get(ctx, q.ns, "user.home_city", client.Identity{UserID: "alice"}, time.Time{}); err != nil || string(m.Value) != `"Lives in Rome"` {
		t.Fatalf("alice's fact: %+v, %v", m, err)
	}
	if a, err := q.tc.Search(ctx, q.ns, client.SearchRequest{Query: "city", UserID: "alice"}); err != nil || a.PendingExtraction {
		t.Fatalf("once done: %+v, %v", a, err)
	}
	if x := q.await(broken, "failed"); x.Attempts != 2 || !strings.Contains(x.LastError, "malformed") {
		t.Fatalf("after two unusable answers: %+v", x)
	}
	// The namespace's status (admin) lists both; another token's retry is ignored.
	if l, err := q.tc.ExtractionStatus(ctx, q.ns, client.ExtractionOptions{}); err != nil || len(l.Requests) != 2 {
		t.Fatalf("extraction_status: %+v, %v", l, err)
	}
	other := q.c.Typed(t).WithToken(env.Token(t, q.api, auth.NewToken{Org: q.org, Role: auth.RoleWriter}))
	if r, err := other.RetryMyExtractions(ctx, []string{broken}); err != nil || len(r.Accepted) != 0 {
		t.Fatalf("another token's retry: %+v, %v", r, err)
	}
	if _, err := other.MyExtraction(ctx, broken); !client.IsCode(err, client.CodeNotFound) {
		t.Fatalf("another token reads the request: %v", err)
	}
	if r, err := q.tc.RetryMyExtractions(ctx, []string{broken, limited}); err != nil || len(r.Accepted) != 1 || r.Accepted[0] != broken {
		t.Fatalf("retry: %+v, %v", r, err)
	}
	q.await(broken, "done")
	if n := len(q.srv.Chats()); n != 5 {
		t.Fatalf("%d calls, want 5", n)
	}
}

// syncBuffer is a log sink a test reads while the process writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// A provider that refuses the key stops the worker: one call, one warning, and every
// request stays pending with no attempt spent.
func TestDeferredExtractionStopsOnARejectedKey(t *testing.T) {
	q := newQueueEnv(t, func(c *config.Config) { c.LLM.APIKey = "sk-wrong" })
	q.srv.RequireKey("sk-right")
	ids := []string{q.enqueue("alice", "I live in Rome."), q.enqueue("alice", "I work in Oslo.")}
	logs := &syncBuffer{}
	n := env.OpenLogged(t, func(c *config.Config) { q.mod(c); c.Roles = config.Roles{config.RoleCommand} },
		slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	env.ServeProcess(t, n)
	testenv.Eventually(t, 30*time.Second, "the worker to be handed both records", func() bool {
		return env.GroupCaughtUp(t, workers.ExtractionGroup, q.topic)
	})
	if c := len(q.srv.Chats()); c != 1 {
		t.Fatalf("%d calls, want 1: a refused key stops the worker", c)
	}
	if w := strings.Count(logs.String(), "refused the key or the model"); w != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", w, logs.String())
	}
	for _, id := range ids {
		if x := q.status(id); x.Status != "pending" || x.Attempts != 0 {
			t.Fatalf("request %s: %+v, want pending with no attempt spent", id, x)
		}
	}
}

// An erasure of a user reaches their queued transcript: the request and its sealed
// payload go with the rest, and nothing of theirs is ever extracted or written, while
// another user's request of the namespace is.
func TestErasureReachesAPendingExtraction(t *testing.T) {
	q := newQueueEnv(t, nil)
	q.srv.ReplyWhen(saying("Bob"), extracted([]said{{"user.name", "Is called Bob", 0}}))
	ctx := context.Background()
	q.c.Put(t, q.ns, "user.city", map[string]any{"value": "Lives in Rome", "user_id": "alice"})
	alice := q.enqueue("alice", "My name is Alice and I live in Rome.")
	bob := q.enqueue("bob", "My name is Bob.")
	view := q.c.Erasure(t, client.ErasureRequest{UserID: "alice", Namespace: q.ns})
	if view.ResidueCount == nil || *view.ResidueCount != 0 || view.Removed["loom.extraction_requests"] != 1 {
		t.Fatalf("erasure: %+v", view)
	}
	if _, err := q.tc.MyExtraction(ctx, alice); !client.IsCode(err, client.CodeNotFound) {
		t.Fatalf("alice's request after the erasure: %v", err)
	}
	defer q.worker()()
	q.await(bob, "done")
	testenv.Eventually(t, 30*time.Second, "the worker to be handed every record", func() bool {
		return env.GroupCaughtUp(t, workers.ExtractionGroup, q.topic)
	})
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND user_id = loom.user_ref(org, 'alice')`,
		q.org, q.ns); n != 0 {
		t.Fatalf("%d revisions of alice's after the erasure", n)
	}
	for _, c := range q.srv.Chats() {
		if c.Contains("Alice") {
			t.Fatalf("alice's transcript reached the provider: %q", c.Text())
		}
	}
}

// An agent listed in LOOM_EXTRACTION_DEFER_AGENTS has its requests deferred without
// asking; another agent's run inline, and defer=false overrides the list.
func TestDeferAgentsAreDeferred(t *testing.T) {
	q := newQueueEnv(t, func(c *config.Config) { c.Command.Extraction.DeferAgents = []string{"nightly"} })
	q.srv.Script(func(llmtest.ChatRequest) llmtest.Reply {
		return extracted([]said{{"user.home_city", "Lives in Rome", 0}})
	})
	ctx := context.Background()
	no := false
	for _, tc := range []struct {
		agent    string
		defer_   *bool
		deferred bool
	}{{"nightly", nil, true}, {"live", nil, false}, {"nightly", &no, false}} {
		a, err := q.tc.FromMessages(ctx, q.ns, client.FromMessagesRequest{Identity: client.Identity{Agent: tc.agent, UserID: "alice"},
			Messages: messages("I live in Rome."), Defer: tc.defer_})
		if err != nil || a.Deferred != tc.deferred || (a.QueueID != "") != tc.deferred || (len(a.Facts) == 1) == tc.deferred {
			t.Fatalf("agent %s, defer %v: %+v, %v", tc.agent, tc.defer_, a, err)
		}
	}
	if n := len(q.srv.Chats()); n != 2 {
		t.Fatalf("%d model calls, want the two inline requests'", n)
	}
}
