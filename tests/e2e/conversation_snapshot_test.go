package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// A namespace snapshot carries the conversation's record: restored elsewhere, a
// session keeps its digest, the facts are recalled to the same turns (ids, speakers, times, indexes and windows
// kept) and a question finds its turn; a restore into a namespace that holds the turns
// writes none twice; and a user erased since the snapshot gets no turn back.
func TestSnapshotRestoreCarriesTheConversation(t *testing.T) {
	workersFromNow(t)
	e := newConversationEnv(t)
	ctx := context.Background()
	s1, _ := e.aliceConversation()
	job := byKey(s1)["user.job"]
	snapshotDigestAlicesFirstSession(t, e)
	payload, digests := snapshotCountsTheConversation(t, ctx, e)
	snapshotExportHoldsAlicesTurns(t, ctx, e, s1, job)
	dst := snapshotRestoreIntoAFreshNamespace(t, ctx, e, payload, digests)
	snapshotRestoreIntoABusySession(t, ctx, e, payload)
	snapshotRecallInTheRestoredNamespace(t, ctx, e, dst, s1, job)
	snapshotRestoreIntoItsSource(t, ctx, e, payload)
	snapshotRestoreAfterBobsErasure(t, ctx, e, payload)
}

// snapshotS1Digest reads alice's s1 digest in ns, "" when it has none: the snapshot's
// steps compare it before the snapshot and after each restore.
func snapshotS1Digest(t *testing.T, e *conversationEnv, ns string) string {
	r := e.c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/sessions/s1/digest", nil)
	if r.Status != http.StatusOK {
		return ""
	}
	return string(r.Body)
}

// snapshotDigestAlicesFirstSession runs the session_digest pass until alice's first
// session is digested, then stops it, so the snapshot carries a digest and no digest of
// the restored namespaces is the pass's own.
func snapshotDigestAlicesFirstSession(t *testing.T, e *conversationEnv) {
	// The session_digest pass digests alice's first session before the snapshot.
	e.srv.Script(func(r llmtest.ChatRequest) llmtest.Reply {
		if r.SchemaName != "session_digest" {
			return llmtest.Status(500, "unscripted")
		}
		if r.Contains("Santa Maria") {
			return llmtest.JSON(map[string]any{"digest": "Alice works night shifts as a nurse at Santa Maria hospital"})
		}
		return llmtest.JSON(map[string]any{"digest": "Alice talked about her week"})
	})
	_, _, stop := env.Serve(t, []string{"workers"}, func(c *config.Config) {
		withProvider(e.srv)(c)
		c.Workers.Resolver.Enabled, c.Workers.Entities.Enabled, c.Workers.Profiles.Enabled = false, false, false
		c.Workers.SessionDigest.Enabled, c.Workers.SessionDigest.MinTurns = true, 2
		c.Workers.SessionDigest.Idle, c.Workers.SessionDigest.Interval = time.Hour, 100*time.Millisecond
	})
	testenv.Eventually(t, 30*time.Second, "the digest of alice's first session", func() bool {
		return strings.Contains(snapshotS1Digest(t, e, e.ns), "Santa Maria")
	})
	stop() // so no digest of the restored namespaces is the pass's own
}

// snapshotCountsTheConversation takes the namespace's snapshot and checks it holds
// every turn and the digest; the later restores replay its payload.
func snapshotCountsTheConversation(t *testing.T, ctx context.Context, e *conversationEnv) (payload []byte, digests int) {
	payload = readAll(t, must[*client.Stream](t, "snapshot")(e.tc.SnapshotNamespace(ctx, e.ns)))
	turns := 0
	var end struct {
		Rows    int64 `json:"rows"`
		Records int64 `json:"records"`
	}
	err := client.ReadLines(bytes.NewReader(payload), func(kind string, line json.RawMessage) error {
		switch kind {
		case "turn":
			turns++
		case "digest":
			digests++
		case "end":
			return json.Unmarshal(line, &end)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// alice's s1 (4 turns), s2 (3), s3 (2) and bob's b1 (1).
	if turns != 10 || digests == 0 || end.Records != int64(10+digests) || end.Rows != 2 {
		t.Fatalf("the snapshot holds %d turn and %d digest lines, its end line %+v; want 10 turns and s1's digest after 2 memories",
			turns, digests, end)
	}
	return payload, digests
}

// snapshotExportHoldsAlicesTurns checks alice's subject-access export against the
// same conversation the snapshot carries: her turns and digests, none of bob's.
func snapshotExportHoldsAlicesTurns(t *testing.T, ctx context.Context, e *conversationEnv, s1 *client.FromMessagesAnswer, job client.ExtractedFact) {
	// alice's subject-access export holds her turns, opened, and her session digests,
	// and nothing of bob's.
	var exported []client.ExportTurn
	var exportedDigests []client.ExportDigest
	var exportEnd client.End
	exportPayload := readAll(t, must[*client.Stream](t, "export")(e.tc.Export(ctx, "alice")))
	err := client.ReadLines(bytes.NewReader(exportPayload), func(kind string, line json.RawMessage) error {
		switch kind {
		case "turn":
			var x client.ExportTurn
			err := json.Unmarshal(line, &x)
			exported = append(exported, x)
			return err
		case "digest":
			var x client.ExportDigest
			err := json.Unmarshal(line, &x)
			exportedDigests = append(exportedDigests, x)
			return err
		case "end":
			return json.Unmarshal(line, &exportEnd)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var jobTurn *client.ExportTurn
	for i, x := range exported {
		if x.UserID != "alice" || x.Namespace != e.ns {
			t.Errorf("alice's export holds a turn of %s in %s", x.UserID, x.Namespace)
		}
		if x.TurnID == s1.TurnIDs[2] {
			jobTurn = &exported[i]
		}
	}
	if len(exported) != 9 || jobTurn == nil || jobTurn.Text != "I work as a nurse at Santa Maria hospital." ||
		jobTurn.Speaker != "Alice" || len(jobTurn.MemoryIDs) != 1 || jobTurn.MemoryIDs[0] != job.MemoryID {
		t.Errorf("alice's export: %d turns, the job's turn %+v; want her 9 turns, the job's opened and linked to its fact", len(exported), jobTurn)
	}
	if len(exportedDigests) == 0 || !strings.Contains(exportedDigests[0].Text, "Santa Maria") ||
		exportEnd.Records != int64(len(exported)+len(exportedDigests)) {
		t.Errorf("alice's export: digests %+v, end %+v", exportedDigests, exportEnd)
	}
}

// snapshotRestoreIntoAFreshNamespace restores the snapshot into a new namespace and
// checks everything is written and s1 keeps its digest; the recall step reads it.
func snapshotRestoreIntoAFreshNamespace(t *testing.T, ctx context.Context, e *conversationEnv, payload []byte, digests int) string {
	dst := testenv.Unique(t, "conv-restored")
	ans := must[*client.RestoreAnswer](t, "restore")(e.tc.RestoreNamespace(ctx, dst, payload))
	if ans.Counts.Restored != 2 || ans.Counts.Turns != 10 || ans.Counts.TurnsUnchanged != 0 || ans.Counts.Digests != int64(digests) {
		t.Fatalf("restore: %+v, want 2 memories, 10 turns and %d digests written", ans.Counts, digests)
	}
	if d := snapshotS1Digest(t, e, dst); !strings.Contains(d, "Santa Maria") {
		t.Errorf("s1's digest in the restored namespace: %q", d)
	}
	return dst
}

// snapshotRestoreIntoABusySession restores into a namespace whose s1 already has
// turns, so the restored turns and s1's digest window are numbered after them.
func snapshotRestoreIntoABusySession(t *testing.T, ctx context.Context, e *conversationEnv, payload []byte) {
	// Into a namespace where alice's s1 holds two turns already: the restored turns are
	// numbered after them, and s1's digest ends at its last restored turn, not at the
	// index the snapshot gave it.
	busy := testenv.Unique(t, "conv-busy")
	must[*client.ObserveAnswer](t, "observe into s1")(e.tc.Observe(ctx, busy, client.ObserveRequest{
		Identity: client.Identity{UserID: "alice", SessionID: "s1"}, Turns: []client.ObservedTurn{
			{Role: "user", Content: "Hello again."}, {Role: "assistant", Content: "Welcome back."}}}))
	must[*client.RestoreAnswer](t, "restore into a busy session")(e.tc.RestoreNamespace(ctx, busy, payload))
	windowEnd := func(ns string) int {
		var d struct {
			WindowEnd int `json:"window_end"`
		}
		if err := json.Unmarshal([]byte(snapshotS1Digest(t, e, ns)), &d); err != nil {
			t.Fatalf("s1's digest in %s: %v", ns, err)
		}
		return d.WindowEnd
	}
	if got, src := windowEnd(busy), windowEnd(e.ns); got != src+2 {
		t.Errorf("s1's digest restored after two held turns ends at index %d; want %d (the snapshot's %d after the two)", got, src+2, src)
	}
}

// snapshotRecallInTheRestoredNamespace recalls the fact and a question in the fresh
// restore: they find the same turns, with their ids, speakers, times and windows.
func snapshotRecallInTheRestoredNamespace(t *testing.T, ctx context.Context, e *conversationEnv, dst string, s1 *client.FromMessagesAnswer, job client.ExtractedFact) {
	byFact := must[*client.RecallAnswer](t, "recall by key")(e.tc.Recall(ctx, dst, client.RecallRequest{Key: "user.job",
		Identity: client.Identity{UserID: "alice", SessionID: "s1"}, Window: intp(1)}))
	if len(byFact.Hits) != 1 || byFact.MemoryID != job.MemoryID {
		t.Fatalf("recall by key in the restored namespace: %+v", byFact)
	}
	h := byFact.Hits[0]
	if h.TurnID != s1.TurnIDs[2] || h.Text != "I work as a nurse at Santa Maria hospital." || h.Speaker != "Alice" ||
		h.MessageIndex != 2 || !h.OccurredAt.Equal(*at(2, 8)) {
		t.Errorf("the restored fact's turn: %+v", h.Turn)
	}
	if got := strings.Join(texts(h.Window), " | "); got != "Sounds tiring. Where do you work? | I work as a nurse at Santa Maria hospital. | That is demanding work." {
		t.Errorf("the restored window: %s", got)
	}
	beach := must[*client.RecallAnswer](t, "recall by question")(e.tc.Recall(ctx, dst, client.RecallRequest{Query: "Cascais beach",
		Identity: client.Identity{UserID: "alice"}, Window: intp(5)}))
	if len(beach.Hits) == 0 || beach.Hits[0].Text != "Pixel loves the beach at Cascais." || beach.Hits[0].MessageIndex != 2 ||
		len(beach.Hits[0].Window) != 3 {
		t.Fatalf("recall by question in the restored namespace: %+v", beach)
	}
}

// snapshotRestoreIntoItsSource restores the snapshot over the namespace it was taken
// of: every turn is held already, so none is written twice.
func snapshotRestoreIntoItsSource(t *testing.T, ctx context.Context, e *conversationEnv, payload []byte) {
	// Into the namespace the snapshot was taken of: every turn is held already.
	back := must[*client.RestoreAnswer](t, "restore into the source")(e.tc.RestoreNamespace(ctx, e.ns, payload))
	if back.Counts.Turns != 0 || back.Counts.TurnsUnchanged != 10 {
		t.Errorf("restore into the source: %+v, want its 10 turns unchanged", back.Counts)
	}
}

// snapshotRestoreAfterBobsErasure erases bob after the snapshot was taken: a restore
// of it must not bring his turn back.
func snapshotRestoreAfterBobsErasure(t *testing.T, ctx context.Context, e *conversationEnv, payload []byte) {
	// bob is erased from the source: a restore of the snapshot taken before leaves his
	// turn out.
	e.c.Erasure(t, client.ErasureRequest{UserID: "bob", Namespace: e.ns})
	later := testenv.Unique(t, "conv-after-erasure")
	after := must[*client.RestoreAnswer](t, "restore after the erasure")(e.tc.RestoreNamespace(ctx, later, payload))
	if after.Counts.Turns != 9 || after.Counts.TurnsErasedSkipped != 1 {
		t.Errorf("restore after bob's erasure: %+v, want alice's 9 turns and bob's 1 left out", after.Counts)
	}
	rocket := must[*client.RecallAnswer](t, "recall bob's turn")(e.tc.Recall(ctx, later, client.RecallRequest{Query: "greyhound Rocket"}))
	for _, hit := range rocket.Hits {
		if hit.UserID == "bob" {
			t.Errorf("an erased user's turn came back: %+v", hit.Turn)
		}
	}
}

// A restore of a snapshot's turns that races an erasure of their user is fenced as its
// memories are: the restore blocks on the namespace's generation lock while bob is
// erased across the org, then answers 409 instead of writing bob's turns back, and a
// retry leaves them out.
func TestTurnRestoreRacingAnErasureIsFenced(t *testing.T) {
	e := newConversationEnv(t)
	ctx := context.Background()
	observe := func(ns, user, text string) {
		must[*client.ObserveAnswer](t, "observe")(e.tc.Observe(ctx, ns, client.ObserveRequest{
			Identity: client.Identity{UserID: user, SessionID: user + "-s"}, Turns: []client.ObservedTurn{{Role: "user", Content: text}}}))
	}
	observe(e.ns, "alice", "Alice keeps bees on her roof.")
	observe(e.ns, "bob", "Bob's greyhound Rocket hates the beach.")
	payload := readAll(t, must[*client.Stream](t, "snapshot")(e.tc.SnapshotNamespace(ctx, e.ns)))
	dst := testenv.Unique(t, "conv-race")
	observe(dst, "carol", "Carol is already here.") // so dst has a generation to lock

	// Hold dst's generation lock, as an erasure's step 1 or a commit does.
	pool := env.PG(t)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var holder int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid() FROM loom.scope_generations WHERE org = $1 AND scope = $2 FOR UPDATE`,
		e.org, dst).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	type result struct {
		ans *client.RestoreAnswer
		err error
	}
	done := make(chan result, 1)
	go func() {
		ans, err := e.tc.RestoreNamespace(ctx, dst, payload)
		done <- result{ans, err}
	}()
	testenv.Eventually(t, 60*time.Second, "the restore to wait on dst's generation lock", func() bool {
		var waiting bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid)))`,
			holder).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting
	})
	// bob is erased while the restore, past its read of the erasures, waits.
	e.c.Erasure(t, client.ErasureRequest{UserID: "bob"})
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	var ce *client.Error
	if !errors.As(r.err, &ce) || ce.Status != http.StatusConflict || ce.Code != client.CodePreconditionFailed {
		t.Fatalf("a restore overtaken by bob's erasure answered %+v, %v; want 409 PRECONDITION_FAILED", r.ans, r.err)
	}
	bobsTurns := func() int {
		ans := must[*client.RecallAnswer](t, "recall bob's turn")(e.tc.Recall(ctx, dst, client.RecallRequest{Query: "greyhound Rocket beach",
			Identity: client.Identity{UserID: "bob"}}))
		return len(ans.Hits)
	}
	if n := bobsTurns(); n != 0 {
		t.Fatalf("bob's turn came back into %s after his erasure: %d hits", dst, n)
	}
	again := must[*client.RestoreAnswer](t, "restore again")(e.tc.RestoreNamespace(ctx, dst, payload))
	if again.Counts.TurnsErasedSkipped != 1 || again.Counts.Turns+again.Counts.TurnsUnchanged != 1 {
		t.Errorf("the retry: %+v; want alice's turn kept and bob's left out", again.Counts)
	}
	if n := bobsTurns(); n != 0 {
		t.Errorf("bob's turn came back with the retry: %d hits", n)
	}
}
