package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

func TestBulkSet(t *testing.T) {
	e := newPhaseEnv(t, nil)
	e.ok("pinned", map[string]any{"value": "the launch is on monday", "pin": true})
	e.ok("locked", map[string]any{"value": "the budget is fixed"})
	e.method("locked", "lock")
	e.ok("same", map[string]any{"value": "nothing changes here"})
	ctx, tc := context.Background(), e.c.Typed(t)
	if _, err := tc.AddBlacklistPattern(ctx, e.ns, "forbidden"); err != nil {
		t.Fatal(err)
	}
	entries := []client.BulkEntry{
		{Key: "a", Value: "alpha is the first letter"},    // 0 written
		{Key: "pinned", Value: "the launch is on friday"}, // 1 skipped_pinned
		{Key: "locked", Value: "the budget doubled"},      // 2 skipped_locked
		{Key: "same", Value: "nothing changes here"},      // 3 skipped_unchanged
		{Key: "bad", Value: "a forbidden word"},           // 4 blacklisted
		{Key: "b", Value: "an early draft"},               // 5 replaced in batch
		{Key: "b", Value: "the final draft of b"},         // 6 written (last wins)
		{Key: "c", Value: "alpha is the first letter"},    // 7 merged into entry 0
	}
	a, err := tc.BulkSet(ctx, e.ns, client.BulkSetRequest{Entries: entries})
	if err != nil {
		t.Fatalf("bulk: %v", err)
	}
	if fmt.Sprint(a.SkippedPinned) != "[1]" || fmt.Sprint(a.SkippedLocked) != "[2]" || fmt.Sprint(a.SkippedUnchanged) != "[3]" ||
		fmt.Sprint(a.Blacklisted) != "[4]" || fmt.Sprint(a.ReplacedInBatch) != "[5]" {
		t.Fatalf("skips: %+v", a)
	}
	written := a.Written
	if len(written) != 2 || written[0].MemoryKey != "a" || written[1].MemoryKey != "b" {
		t.Fatalf("written: %+v", written)
	}
	if merged := a.Merged; len(merged) != 1 || merged[0].Index != 7 {
		t.Fatalf("merged: %+v", merged)
	}
	_, h := e.head("b")
	eq(t, "last writer wins in a batch", h["value"], any("the final draft of b"))
	// One commit: the batch's revisions are consecutive seqs.
	seqA, seqB := written[0].Seq, written[1].Seq
	eq(t, "consecutive seqs", seqB, seqA+1)
	if audit := e.audit(); audit[seqA] != "memory.bulk_set" {
		t.Fatalf("audit op %q", audit[seqA])
	}
	// More than 1,000 entries is refused.
	many := make([]client.BulkEntry, 1001)
	for i := range many {
		many[i] = client.BulkEntry{Key: fmt.Sprintf("k%d", i), Value: i}
	}
	if _, err := tc.BulkSet(ctx, e.ns, client.BulkSetRequest{Entries: many}); !isStatus(err, http.StatusUnprocessableEntity) {
		t.Fatalf("1001 entries: %v", err)
	}
	// A malformed entry names itself.
	_, err = tc.BulkSet(ctx, e.ns, client.BulkSetRequest{Entries: []client.BulkEntry{{Key: "x", Value: "ok"}, {Key: "", Value: 1}}})
	if e, ok := client.AsError(err); !ok || e.Status != http.StatusUnprocessableEntity || e.Field != "entries[1].memory_key" {
		t.Fatalf("bad entry: %v", err)
	}
}

// isStatus reports whether err is an error answer of that status.
func isStatus(err error, status int) bool {
	e, ok := client.AsError(err)
	return ok && e.Status == status
}

func keyed(t *testing.T, c *testenv.Client, method, path, key string, body any) *testenv.Response {
	t.Helper()
	b, _ := json.Marshal(body)
	return c.DoHeaders(t, method, path, b, map[string]string{"Idempotency-Key": key})
}

// The Idempotency-Key table of docs/architecture.md, row by row.
func TestIdempotencyKey(t *testing.T) {
	e := newPhaseEnv(t, nil)
	path := "/v1/namespaces/" + e.ns + "/memories/k"
	first := keyed(t, e.c, http.MethodPut, path, "key-1", map[string]any{"value": "once"})
	if first.Status != http.StatusOK {
		t.Fatalf("first: %d %s", first.Status, first.Body)
	}
	// done → the stored answer, nothing written again.
	again := keyed(t, e.c, http.MethodPut, path, "key-1", map[string]any{"value": "once"})
	if again.Status != http.StatusOK || fmt.Sprint(again.JSON(t)) != fmt.Sprint(first.JSON(t)) {
		t.Fatalf("replay: %d %s, want the stored answer %s", again.Status, again.Body, first.Body)
	}
	eq(t, "revisions", e.revisions("k"), 1)
	// another request digest → 409.
	if r := keyed(t, e.c, http.MethodPut, path, "key-1", map[string]any{"value": "twice"}); r.Status != http.StatusConflict || r.ErrorCode() != "IDEMPOTENT_CONFLICT" {
		t.Fatalf("other digest: %d %s", r.Status, r.Body)
	}
	// A refused request releases its key: the retry runs at once.
	e.method("k", "lock")
	if r := keyed(t, e.c, http.MethodPut, path, "key-2", map[string]any{"value": "changed"}); r.Status != http.StatusLocked {
		t.Fatalf("locked: %d %s", r.Status, r.Body)
	}
	e.method("k", "unlock")
	if r := keyed(t, e.c, http.MethodPut, path, "key-2", map[string]any{"value": "changed"}); r.Status != http.StatusOK {
		t.Fatalf("retry after a refusal: %d %s", r.Status, r.Body)
	}
}

// loseFirstAnswer is a process whose first commit's answer is lost on the way back
// (the connection cut right after COMMIT), with a 2 s Idempotency-Key lease.
func loseFirstAnswer(t *testing.T) *testenv.Client {
	t.Helper()
	lose := true
	n, url := env.API(t, func(c *config.Config) { c.Command.IdempotencyLease = 2 * time.Second },
		app.WithCommandFaults(command.Faults{AfterCommit: func() error {
			if lose {
				lose = false
				return errors.New("connection cut after COMMIT")
			}
			return nil
		}}))
	return testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
}

func lostAnswer(t *testing.T, err error) {
	t.Helper()
	if e, ok := client.AsError(err); !ok || e.Status != http.StatusServiceUnavailable || e.Code != client.CodePostgresUnavailable || !e.OutcomeUnknown {
		t.Fatalf("lost answer: %v", err)
	}
}

// The connection is cut right after a memory.set's COMMIT: the write answers 503 with
// outcome_unknown. Its commit stored its answer under the key, so a retry with the
// same key replays that answer at once, the committed version; no second revision
// exists.
func TestCommitAnswerLostThenRetried(t *testing.T) {
	c := loseFirstAnswer(t)
	ns := testenv.Unique(t, "lost")
	ctx, tc := context.Background(), c.Typed(t)
	set := func() (*client.SetAnswer, error) {
		return tc.Set(ctx, ns, "k", client.SetRequest{Value: "committed once"}, client.IdempotencyKey("retry-me"))
	}
	_, err := set()
	lostAnswer(t, err)
	replay, err := set()
	if err != nil {
		t.Fatalf("retry within the lease: %v", err)
	}
	if !replay.Replayed || replay.Committed != nil || replay.MemoryKey != "k" || !replay.Written {
		t.Fatalf("replay: %+v, want the stored answer", replay)
	}
	oneRevisionAt(t, ns, replay.VersionText)
}

// The connection is cut right after a memory.bulk_set's COMMIT, which marks its key
// committed with the revisions and stores its answer after: a retry with the same key
// answers in progress while the lease runs, then replays the committed revisions. No
// second revision exists.
func TestBulkCommitAnswerLostThenRetried(t *testing.T) {
	c := loseFirstAnswer(t)
	ns := testenv.Unique(t, "lostbulk")
	ctx, tc := context.Background(), c.Typed(t)
	bulk := func() (*client.BulkAnswer, error) {
		return tc.BulkSet(ctx, ns, client.BulkSetRequest{Entries: []client.BulkEntry{{Key: "k", Value: "committed once"}}},
			client.IdempotencyKey("retry-me"))
	}
	_, err := bulk()
	lostAnswer(t, err)
	if _, err := bulk(); !testenv.Retryable503(err, client.CodeIdempotentInProgress) {
		t.Fatalf("retry within the lease: %v", err)
	}
	var replay *client.BulkAnswer
	testenv.Eventually(t, 10*time.Second, "the lease to run out", func() bool {
		replay, err = bulk()
		return err == nil
	})
	a := replay.Committed
	if a == nil || a.IdempotentReplay != "committed" || a.MemoryKey != "k" {
		t.Fatalf("replay: %+v", replay)
	}
	oneRevisionAt(t, ns, a.VersionText)
}

// oneRevisionAt checks that acme's namespace ns holds one revision, its head at the
// version a replay answered: the retry wrote nothing again.
func oneRevisionAt(t *testing.T, ns, replayed string) {
	t.Helper()
	pool := env.PG(t)
	revs := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_revisions WHERE org = 'acme' AND namespace = $1`, ns)
	head := testenv.Int(t, pool, `SELECT version FROM loom.memory_current WHERE org = 'acme' AND namespace = $1`, ns)
	eq(t, "revisions", revs, 1)
	if fmt.Sprint(head) != replayed {
		t.Fatalf("replayed version %v, head %d", replayed, head)
	}
}

// Eight clients send the same keyed request at once: one revision is committed and
// every answer agrees with it.
func TestConcurrentKeyedRequests(t *testing.T) {
	e := newPhaseEnv(t, nil)
	tc := e.c.Typed(t)
	answers := make([]*client.SetAnswer, 8)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				a, err := tc.Set(context.Background(), e.ns, "k", client.SetRequest{Value: "exactly once"}, client.IdempotencyKey("same-key"))
				if client.IsCode(err, client.CodeIdempotentInProgress) {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				answers[i], errs[i] = a, err
				return
			}
		}()
	}
	wg.Wait()
	eq(t, "revisions", e.revisions("k"), 1)
	var version string
	for i, a := range answers {
		if errs[i] != nil {
			t.Fatalf("client %d: %v", i, errs[i])
		}
		v := a.VersionText
		if version == "" {
			version = v
		}
		if v != version {
			t.Fatalf("client %d saw version %v, another %v", i, v, version)
		}
	}
}

// A request slower than its lease is taken over by a retry: the retry commits, and the
// slow request answers 503 IDEMPOTENT_TAKEN_OVER with nothing committed.
func TestIdempotencyTakeOver(t *testing.T) {
	release := make(chan struct{})
	slowed := make(chan struct{}, 1)
	first := true
	var mu sync.Mutex
	n, url := env.API(t, func(c *config.Config) { c.Command.IdempotencyLease = 300 * time.Millisecond },
		app.WithCommandFaults(command.Faults{BeforeCommit: func() {
			mu.Lock()
			slow := first
			first = false
			mu.Unlock()
			if slow {
				slowed <- struct{}{}
				<-release
			}
		}}))
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	ns := testenv.Unique(t, "takeover")
	path := "/v1/namespaces/" + ns + "/memories/k"
	slowAnswer := make(chan *testenv.Response, 1)
	go func() { slowAnswer <- keyed(t, c, http.MethodPut, path, "k1", map[string]any{"value": "v"}) }()
	<-slowed
	time.Sleep(400 * time.Millisecond) // the slow request's lease runs out
	retry := keyed(t, c, http.MethodPut, path, "k1", map[string]any{"value": "v"})
	close(release)
	slow := <-slowAnswer
	if retry.Status != http.StatusOK {
		t.Fatalf("retry: %d %s", retry.Status, retry.Body)
	}
	if slow.Status != http.StatusServiceUnavailable || slow.ErrorCode() != "IDEMPOTENT_TAKEN_OVER" {
		t.Fatalf("slow request: %d %s", slow.Status, slow.Body)
	}
	revs := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.memory_revisions WHERE org = 'acme' AND namespace = $1`, ns)
	eq(t, "revisions", revs, 1)
}

// While an erasure's fence holds the org's Idempotency-Key rows (one transaction locks
// and re-tokens them), a keyed request answers 503 IDEMPOTENT_IN_PROGRESS, retryable,
// instead of waiting out the erasure; once the lock is gone it replays its answer.
func TestKeyedRequestDuringAnErasureFenceAnswersInProgress(t *testing.T) {
	e := newPhaseEnv(t, nil)
	tc := e.c.Typed(t)
	ctx := context.Background()
	set := func() (*client.SetAnswer, error) {
		return tc.Set(ctx, e.ns, "k", client.SetRequest{Value: "fenced"}, client.IdempotencyKey("fence-key"))
	}
	first, err := set()
	if err != nil {
		t.Fatalf("first write: %v", err)
	}
	fence, err := env.PG(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer fence.Rollback(ctx)
	if _, err := fence.Exec(ctx, `SELECT 1 FROM loom.idempotency WHERE org = 'acme' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	if _, err := set(); !testenv.Retryable503(err, client.CodeIdempotentInProgress) {
		t.Fatalf("a keyed retry while the fence holds the key: %v", err)
	}
	if err := fence.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := set()
	if err != nil || again.VersionText != first.VersionText {
		t.Fatalf("after the fence: %+v %v, want the first answer %+v", again, err, first)
	}
	eq(t, "revisions", e.revisions("k"), 1)
}
