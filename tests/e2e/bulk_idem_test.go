package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

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
	b, _ := json.Marshal(map[string]any{"pattern": "forbidden"})
	e.c.Do(t, http.MethodPost, "/v1/namespaces/"+e.ns+"/blacklist", b)
	entries := []map[string]any{
		{"key": "a", "value": "alpha is the first letter"},    // 0 written
		{"key": "pinned", "value": "the launch is on friday"}, // 1 skipped_pinned
		{"key": "locked", "value": "the budget doubled"},      // 2 skipped_locked
		{"key": "same", "value": "nothing changes here"},      // 3 skipped_unchanged
		{"key": "bad", "value": "a forbidden word"},           // 4 blacklisted
		{"key": "b", "value": "an early draft"},               // 5 replaced in batch
		{"key": "b", "value": "the final draft of b"},         // 6 written (last wins)
		{"key": "c", "value": "alpha is the first letter"},    // 7 merged into entry 0
	}
	r := e.do(http.MethodPost, "/memories:bulkSet", map[string]any{"entries": entries})
	if r.Status != http.StatusOK {
		t.Fatalf("bulk: %d %s", r.Status, r.Body)
	}
	a := r.JSON(t)
	ints := func(k string) string { return fmt.Sprint(a[k]) }
	if ints("skipped_pinned") != "[1]" || ints("skipped_locked") != "[2]" || ints("skipped_unchanged") != "[3]" ||
		ints("blacklisted") != "[4]" || ints("replaced_in_batch") != "[5]" {
		t.Fatalf("skips: %s", r.Body)
	}
	written := a["written"].([]any)
	if len(written) != 2 || written[0].(map[string]any)["memory_key"] != "a" || written[1].(map[string]any)["memory_key"] != "b" {
		t.Fatalf("written: %v", written)
	}
	merged := a["merged"].([]any)
	if len(merged) != 1 || merged[0].(map[string]any)["index"] != 7.0 {
		t.Fatalf("merged: %v", merged)
	}
	_, h := e.head("b")
	eq(t, "last writer wins in a batch", h["value"], any("the final draft of b"))
	// One commit: the batch's revisions are consecutive seqs.
	seqA, seqB := written[0].(map[string]any)["seq"].(float64), written[1].(map[string]any)["seq"].(float64)
	eq(t, "consecutive seqs", seqB, seqA+1)
	if audit := e.audit(); audit[int64(seqA)] != "memory.bulk_set" {
		t.Fatalf("audit op %q", audit[int64(seqA)])
	}
	// More than 1,000 entries is refused.
	many := make([]map[string]any, 1001)
	for i := range many {
		many[i] = map[string]any{"key": fmt.Sprintf("k%d", i), "value": i}
	}
	if r := e.do(http.MethodPost, "/memories:bulkSet", map[string]any{"entries": many}); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("1001 entries: %d", r.Status)
	}
	// A malformed entry names itself.
	r = e.do(http.MethodPost, "/memories:bulkSet", map[string]any{"entries": []any{map[string]any{"key": "x", "value": "ok"}, map[string]any{"key": "", "value": 1}}})
	if r.Status != http.StatusUnprocessableEntity || r.JSON(t)["error"].(map[string]any)["field"] != "entries[1].memory_key" {
		t.Fatalf("bad entry: %d %s", r.Status, r.Body)
	}
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

// The connection is cut right after COMMIT: the write answers 503 with outcome_unknown;
// a retry with the same key answers in progress while the lease runs, then replays the
// committed revision. No second revision exists.
func TestCommitAnswerLostThenRetried(t *testing.T) {
	lose := true
	n, url := env.API(t, func(c *config.Config) { c.Command.IdempotencyLease = 700 * time.Millisecond },
		app.WithCommandFaults(command.Faults{AfterCommit: func() error {
			if lose {
				lose = false
				return errors.New("connection cut after COMMIT")
			}
			return nil
		}}))
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	ns := testenv.Unique(t, "lost")
	path := "/v1/namespaces/" + ns + "/memories/k"
	r := keyed(t, c, http.MethodPut, path, "retry-me", map[string]any{"value": "committed once"})
	if r.Status != http.StatusServiceUnavailable || r.ErrorCode() != "POSTGRES_UNAVAILABLE" || r.JSON(t)["error"].(map[string]any)["outcome_unknown"] != true {
		t.Fatalf("lost answer: %d %s", r.Status, r.Body)
	}
	if r := keyed(t, c, http.MethodPut, path, "retry-me", map[string]any{"value": "committed once"}); r.Status != http.StatusServiceUnavailable || r.ErrorCode() != "IDEMPOTENT_IN_PROGRESS" {
		t.Fatalf("retry within the lease: %d %s", r.Status, r.Body)
	}
	var replay *testenv.Response
	testenv.Eventually(t, 10*time.Second, "the lease to run out", func() bool {
		replay = keyed(t, c, http.MethodPut, path, "retry-me", map[string]any{"value": "committed once"})
		return replay.Status == http.StatusOK
	})
	a := replay.JSON(t)
	if a["idempotent_replay"] != "committed" || a["memory_key"] != "k" {
		t.Fatalf("replay: %s", replay.Body)
	}
	pool := env.PG(t)
	revs := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_revisions WHERE org = 'acme' AND namespace = $1`, ns)
	head := testenv.Int(t, pool, `SELECT version FROM loom.memory_current WHERE org = 'acme' AND namespace = $1`, ns)
	eq(t, "revisions", revs, 1)
	if fmt.Sprint(head) != a["version_text"] {
		t.Fatalf("replayed version %v, head %d", a["version_text"], head)
	}
}

// Eight clients send the same keyed request at once: one revision is committed and
// every answer agrees with it.
func TestConcurrentKeyedRequests(t *testing.T) {
	e := newPhaseEnv(t, nil)
	path := "/v1/namespaces/" + e.ns + "/memories/k"
	answers := make([]*testenv.Response, 8)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				r := keyed(t, e.c, http.MethodPut, path, "same-key", map[string]any{"value": "exactly once"})
				if r.ErrorCode() == "IDEMPOTENT_IN_PROGRESS" {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				answers[i] = r
				return
			}
		}()
	}
	wg.Wait()
	eq(t, "revisions", e.revisions("k"), 1)
	var version any
	for i, r := range answers {
		if r.Status != http.StatusOK {
			t.Fatalf("client %d: %d %s", i, r.Status, r.Body)
		}
		v := r.JSON(t)["version_text"]
		if version == nil {
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
