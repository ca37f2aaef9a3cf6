package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// conversationEnv is a Loom with a scripted model provider, an org's admin client, and
// a client bound to alice.
type conversationEnv struct {
	*extractionEnv
	org   string
	alice *client.Client
}

func newConversationEnv(t *testing.T) *conversationEnv {
	t.Helper()
	srv := llmtest.New(t)
	n, url := env.API(t, func(c *config.Config) {
		withProvider(srv)(c)
		c.Command.Extraction.QueueEnabled = false
	})
	org := testenv.Unique(t, "org")
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	alice := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleWriter, ReadUserID: "alice"}))
	e := &extractionEnv{t: t, srv: srv, n: n, url: url, c: c, tc: c.Typed(t), ns: testenv.Unique(t, "conv")}
	return &conversationEnv{extractionEnv: e, org: org, alice: alice.Typed(t)}
}

func at(day, hour int) *time.Time {
	t := time.Date(2026, 3, day, hour, 0, 0, 0, time.UTC)
	return &t
}

func intp(n int) *int { return &n }

func texts(ts []client.Turn) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Text)
	}
	return out
}

// aliceConversation keeps three sessions of alice's: s1 and s3 through
// memory.set_from_messages (the scripted model extracts a fact from each), s2 through
// memory.observe; and one session of bob's.
func (e *conversationEnv) aliceConversation() (s1, s3 *client.FromMessagesAnswer) {
	t := e.t
	ctx := context.Background()
	e.srv.ReplyWhen(isExtraction,
		extracted([]said{{"user.job", "Works as a nurse at Santa Maria hospital", 2}}),
		extracted([]said{{"user.sister_city", "The user's sister Ana lives in Porto", 1}}))
	alice := client.Identity{UserID: "alice", SessionID: "s1"}
	s1, err := e.tc.FromMessages(ctx, e.ns, client.FromMessagesRequest{Identity: alice, Messages: []client.Message{
		{Role: "user", Content: "Morning! Long night shift again.", At: at(2, 8)},
		{Role: "assistant", Content: "Sounds tiring. Where do you work?", At: at(2, 8)},
		{Role: "user", Content: "I work as a nurse at Santa Maria hospital.", At: at(2, 8), Speaker: "Alice"},
		{Role: "assistant", Content: "That is demanding work.", At: at(2, 8)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.tc.Observe(ctx, e.ns, client.ObserveRequest{Identity: client.Identity{UserID: "alice", SessionID: "s2"}, Turns: []client.ObservedTurn{
		{Role: "user", Content: "We adopted a greyhound called Pixel yesterday.", At: at(5, 19)},
		{Role: "assistant", Content: "Congratulations on the new family member!", At: at(5, 19)},
	}}); err != nil {
		t.Fatal(err)
	}
	// The session goes on in a second call: its turns are numbered after the first's.
	if _, err := e.tc.Observe(ctx, e.ns, client.ObserveRequest{Identity: client.Identity{UserID: "alice", SessionID: "s2"}, Turns: []client.ObservedTurn{
		{Role: "user", Content: "Pixel loves the beach at Cascais.", At: at(5, 20)},
	}}); err != nil {
		t.Fatal(err)
	}
	s3, err = e.tc.FromMessages(ctx, e.ns, client.FromMessagesRequest{Identity: client.Identity{UserID: "alice", SessionID: "s3"},
		Messages: []client.Message{
			{Role: "user", Content: "Planning a trip north next month.", At: at(9, 10)},
			{Role: "user", Content: "My sister Ana lives in Porto, so I'll stay with her.", At: at(9, 10)},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.tc.Observe(ctx, e.ns, client.ObserveRequest{Identity: client.Identity{UserID: "bob", SessionID: "b1"}, Turns: []client.ObservedTurn{
		{Role: "user", Content: "My greyhound Rocket hates the beach."},
	}}); err != nil {
		t.Fatal(err)
	}
	return s1, s3
}

// A multi-session conversation kept through memory.set_from_messages and
// memory.observe is recalled by the fact drawn from it (by key and by id: the turn it
// came from, with its session, time and neighbours) and by a question (the verbatim
// turn that answers it, with its window).
func TestRecallByFactAndByQuestion(t *testing.T) {
	e := newConversationEnv(t)
	ctx := context.Background()
	s1, s3 := e.aliceConversation()
	if len(s1.TurnIDs) != 4 || len(s3.TurnIDs) != 2 {
		t.Fatalf("turn ids: %v, %v", s1.TurnIDs, s3.TurnIDs)
	}
	job := byKey(s1)["user.job"]
	if job.MemoryID == "" {
		t.Fatalf("the fact: %+v", job)
	}

	byFact, err := e.tc.Recall(ctx, e.ns, client.RecallRequest{Key: "user.job", Identity: client.Identity{UserID: "alice", SessionID: "s1"}, Window: intp(1)})
	if err != nil {
		t.Fatal(err)
	}
	if len(byFact.Hits) != 1 || byFact.MemoryID != job.MemoryID {
		t.Fatalf("recall by key: %+v", byFact)
	}
	h := byFact.Hits[0]
	if h.Text != "I work as a nurse at Santa Maria hospital." || h.SessionID != "s1" || h.Speaker != "Alice" || h.MessageIndex != 2 ||
		!h.OccurredAt.Equal(*at(2, 8)) || h.TurnID != s1.TurnIDs[2] || h.Role != "user" {
		t.Errorf("the fact's turn: %+v", h.Turn)
	}
	if got := strings.Join(texts(h.Window), " | "); got != "Sounds tiring. Where do you work? | I work as a nurse at Santa Maria hospital. | That is demanding work." {
		t.Errorf("the window: %s", got)
	}
	byID, err := e.tc.Recall(ctx, e.ns, client.RecallRequest{MemoryID: job.MemoryID, Window: intp(0)})
	if err != nil || len(byID.Hits) != 1 || byID.Hits[0].TurnID != h.TurnID || len(byID.Hits[0].Window) != 1 {
		t.Errorf("recall by id: %+v, %v", byID, err)
	}

	asked, err := e.alice.Recall(ctx, e.ns, client.RecallRequest{Query: "what is the name of the greyhound?", Window: intp(1)})
	if err != nil {
		t.Fatal(err)
	}
	if len(asked.Hits) == 0 || asked.Hits[0].Text != "We adopted a greyhound called Pixel yesterday." || asked.Hits[0].SessionID != "s2" {
		t.Fatalf("recall by question: %+v", asked)
	}
	if got := strings.Join(texts(asked.Hits[0].Window), " | "); got != "We adopted a greyhound called Pixel yesterday. | Congratulations on the new family member!" {
		t.Errorf("the question's window: %s", got)
	}
	for _, hit := range asked.Hits {
		if hit.UserID != "alice" || strings.Contains(hit.Text, "Rocket") {
			t.Errorf("a token bound to alice recalled %+v", hit.Turn)
		}
	}
	// The session that went on in a second call: its turns in arrival order.
	beach, err := e.tc.Recall(ctx, e.ns, client.RecallRequest{Query: "Cascais beach", Identity: client.Identity{UserID: "alice"}, Window: intp(5)})
	if err != nil || len(beach.Hits) == 0 || beach.Hits[0].MessageIndex != 2 || len(beach.Hits[0].Window) != 3 {
		t.Fatalf("recall of the second call's turn: %+v, %v", beach, err)
	}
	// The turns' records take the namespace's seqs: every follower passes over them (a
	// search and a history wait until the index and ClickHouse hold the namespace's
	// generation), the topic holds seqs 1..generation with no gap, and no text of a turn
	// is on it in the clear.
	e.projected()
	if _, err := e.tc.History(ctx, e.ns, "user.job", client.Identity{UserID: "alice", SessionID: "s1"}); err != nil {
		t.Fatalf("history behind the barrier: %v", err)
	}
	pool := env.PG(t)
	gen := testenv.Int(t, pool, `SELECT generation FROM loom.scope_generations WHERE org = $1 AND scope = $2`, e.org, e.ns)
	var stream []*events.Envelope
	testenv.Eventually(t, 30*time.Second, "the relay to publish the namespace", func() bool {
		return int64(len(env.NamespaceRecords(t, e.org, e.ns))) >= gen
	})
	stream = testenv.Stream(t, env.TopicRecords(t), e.org, e.ns, gen)
	observed := 0
	for _, r := range stream {
		if r.Type == events.TypeTurnsObserved {
			observed++
			if r.Turns == nil || len(r.Turns.Items) == 0 || r.Revision != nil {
				t.Errorf("a turns record: %+v", r)
			}
		}
	}
	if observed != 5 {
		t.Errorf("%d memory.turns_observed records, want 5 (two fromMessages, three observes)", observed)
	}
	if leaks := testenv.Leaks(env.TopicRecords(t), "Santa Maria", "greyhound called Pixel", "Rocket"); len(leaks) > 0 {
		t.Errorf("turn text on the topic in the clear: %v", leaks)
	}
	// Unbound, a question reaches every user's turns; bound to alice, never bob's.
	all, err := e.tc.Recall(ctx, e.ns, client.RecallRequest{Query: "greyhound beach", TopK: intp(10)})
	if err != nil || !strings.Contains(strings.Join(texts(hitTurns(all)), " "), "Rocket") {
		t.Errorf("an unbound recall: %+v, %v", all, err)
	}
	var ce *client.Error
	if _, err := e.alice.Recall(ctx, e.ns, client.RecallRequest{Query: "greyhound", Identity: client.Identity{UserID: "bob"}}); !errors.As(err, &ce) || ce.Status != http.StatusForbidden {
		t.Errorf("alice's token recalling bob's turns: %v", err)
	}
}

func hitTurns(a *client.RecallAnswer) []client.Turn {
	var out []client.Turn
	for _, h := range a.Hits {
		out = append(out, h.Turn)
	}
	return out
}

// An erasure of a user takes their turns and the links to them: recall finds nothing,
// and the saga's census counts zero in both tables.
func TestErasureRemovesTheConversationRecord(t *testing.T) {
	e := newConversationEnv(t)
	ctx := context.Background()
	e.aliceConversation()
	pool := env.PG(t)
	count := func(table, user string) string {
		return strings.Join(testenv.PGStrings(t, pool, `SELECT count(*)::text FROM loom.`+table+` WHERE org = $1 AND namespace = $2 AND user_id = loom.user_ref($1, $3)`,
			e.org, e.ns, user), "")
	}
	if count("memory_evidence", "alice") != "9" || count("memory_belief_sources", "alice") != "2" {
		t.Fatalf("before the erasure: %s turns, %s links", count("memory_evidence", "alice"), count("memory_belief_sources", "alice"))
	}
	view := e.c.Erase(t, map[string]any{"user_id": "alice", "namespace": e.ns})
	completed(t, view)
	if count("memory_evidence", "alice") != "0" || count("memory_belief_sources", "alice") != "0" || count("memory_evidence", "bob") != "1" {
		t.Errorf("after the erasure: alice %s turns, %s links; bob %s turns", count("memory_evidence", "alice"),
			count("memory_belief_sources", "alice"), count("memory_evidence", "bob"))
	}
	removed, _ := view["removed"].(map[string]any)
	if removed["loom.memory_evidence"] != float64(9) || removed["loom.memory_belief_sources"] != float64(2) {
		t.Errorf("the saga's account of what it removed: %v", view["removed"])
	}
	a, err := e.tc.Recall(ctx, e.ns, client.RecallRequest{Query: "greyhound nurse Porto", TopK: intp(50)})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range a.Hits {
		if h.UserID == "alice" {
			t.Errorf("an erased turn recalled: %+v", h.Turn)
		}
	}
	var ce *client.Error
	if _, err := e.tc.Recall(ctx, e.ns, client.RecallRequest{Key: "user.job", Identity: client.Identity{UserID: "alice", SessionID: "s1"}}); !errors.As(err, &ce) || ce.Status != http.StatusNotFound {
		t.Errorf("recall of an erased fact: %v", err)
	}
}

// Bad input is a 422 naming the field, never a 500.
func TestConversationRecordRefusesBadInput(t *testing.T) {
	e := newConversationEnv(t)
	for _, c := range []struct {
		path, body, field string
	}{
		{"/turns", `{"turns": []}`, "turns"},
		{"/turns", `{"user_id": "alice"}`, "turns"},
		{"/turns", `{"turns": [{"role": "user", "content": "hi"}, {"role": "robot", "content": "beep"}]}`, "turns[1].role"},
		{"/turns", `{"turns": [{"role": "user", "content": "  "}]}`, "turns[0].content"},
		{"/turns", `{"turns": [{"role": "user", "content": "` + strings.Repeat("a", 32001) + `"}]}`, "turns[0].content"},
		{"/memories:recall", `{}`, "query"},
		{"/memories:recall", `{"query": "x", "key": "k"}`, "query"},
		{"/memories:recall", `{"query": "the greyhound", "window": 1000}`, "window"},
		{"/memories:recall", `{"query": "the greyhound", "window": -1}`, "window"},
		{"/memories:recall", `{"query": "the greyhound", "top_k": 0}`, "top_k"},
		{"/memories:recall", `{"memory_id": "not-a-uuid"}`, "memory_id"},
		{"/memories:recall", `{"query": "the of a"}`, "query"},
		{"/memories:fromMessages", `{"messages": [{"role": "robot", "content": "beep"}]}`, "messages[0].role"},
	} {
		r := e.c.Do(t, http.MethodPost, "/v1/namespaces/"+e.ns+c.path, []byte(c.body))
		if r.Status != http.StatusUnprocessableEntity {
			t.Errorf("%s %s: %d %s", c.path, clipped(c.body), r.Status, r.Body)
			continue
		}
		if f := errorField(r.JSON(t)); f != c.field {
			t.Errorf("%s %s: field %q, want %q", c.path, clipped(c.body), f, c.field)
		}
	}
}

func clipped(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

func errorField(m map[string]any) string {
	if e, ok := m["error"].(map[string]any); ok {
		f, _ := e["field"].(string)
		return f
	}
	return ""
}

// A deferred memory.set_from_messages keeps its transcript too, once a worker ran it:
// the fact it wrote is recalled by its key, back to the turn it was drawn from.
func TestDeferredExtractionKeepsItsTurns(t *testing.T) {
	q := newQueueEnv(t, nil)
	q.srv.Script(func(llmtest.ChatRequest) llmtest.Reply {
		return extracted([]said{{"user.home_city", "Lives in Rome", 1}})
	})
	id := q.enqueue("alice", "Hello there.", "I live in Rome these days.")
	defer q.worker()()
	q.await(id, "done")
	a, err := q.tc.Recall(context.Background(), q.ns, client.RecallRequest{Key: "user.home_city", Identity: client.Identity{UserID: "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Hits) != 1 || a.Hits[0].Text != "I live in Rome these days." || a.Hits[0].MessageIndex != 1 ||
		strings.Join(texts(a.Hits[0].Window), " | ") != "Hello there. | I live in Rome these days." {
		t.Errorf("recall of a deferred request's fact: %+v", a)
	}
}

// memory.import keeps the items it wrote as turns, each linked to its memory: recall by
// an imported key reads the text it came from, and a re-run of the same import keeps
// nothing twice.
func TestImportKeepsItsItems(t *testing.T) {
	e := newConversationEnv(t)
	ctx := context.Background()
	req := client.ImportRequest{Identity: client.Identity{UserID: "alice"}, Items: []client.ImportItem{
		{Text: "Alice's passport number ends in 4417", ValidAt: at(1, 9)}, {Text: "Alice is allergic to penicillin", ValidAt: at(1, 10)}}}
	a, err := e.tc.Import(ctx, e.ns, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.tc.Import(ctx, e.ns, req); err != nil {
		t.Fatal(err)
	}
	key := a.Items[1].Key
	r, err := e.tc.Recall(ctx, e.ns, client.RecallRequest{Key: key, Identity: client.Identity{UserID: "alice"}, Window: intp(1)})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Hits) != 1 || r.Hits[0].Text != "Alice is allergic to penicillin" || !r.Hits[0].OccurredAt.Equal(*at(1, 10)) || len(r.Hits[0].Window) != 2 {
		t.Errorf("recall of an imported key: %+v", r)
	}
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.memory_evidence WHERE org = $1 AND namespace = $2`, e.org, e.ns); n != 2 {
		t.Errorf("%d turns kept after the import and its re-run, want 2", n)
	}
}

// memory.import's texts commit with its memories: when the process loses the import's
// commit on the way back (a crash right after COMMIT), the memory it wrote already has
// the text it came from, and nothing is kept twice.
func TestAnImportsTextsCommitWithItsMemories(t *testing.T) {
	ctx := context.Background()
	var cut atomic.Bool
	_, raw, org := env.OrgAPI(t, nil, app.WithCommandFaults(command.Faults{AfterCommit: func() error {
		if cut.CompareAndSwap(true, false) {
			return errors.New("the process died after COMMIT")
		}
		return nil
	}}))
	ns := testenv.Unique(t, "import-one-commit")
	const text = "Alice is allergic to penicillin"
	cut.Store(true)
	r := raw.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:import",
		[]byte(`{"user_id": "alice", "items": [{"text": "`+text+`"}]}`))
	if r.Status != http.StatusServiceUnavailable {
		t.Fatalf("an import whose commit answer was lost: %d %s", r.Status, r.Body)
	}
	sum := sha256.Sum256([]byte(text))
	key := "import:" + hex.EncodeToString(sum[:])[:24]
	tc := raw.Typed(t)
	if _, err := tc.Get(ctx, ns, key, client.Identity{UserID: "alice"}, time.Time{}); err != nil {
		t.Fatalf("the imported memory: %v", err)
	}
	rec := must[*client.RecallAnswer](t, "recall")(tc.Recall(ctx, ns, client.RecallRequest{Key: key, Identity: client.Identity{UserID: "alice"}}))
	if len(rec.Hits) != 1 || rec.Hits[0].Text != text {
		t.Fatalf("the imported memory's text after the lost commit: %+v; want the text it came from", rec)
	}
	must[*client.ImportAnswer](t, "import again")(tc.Import(ctx, ns, client.ImportRequest{Identity: client.Identity{UserID: "alice"},
		Items: []client.ImportItem{{Text: text}}}))
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.memory_evidence WHERE org = $1 AND namespace = $2`, org, ns); n != 1 {
		t.Errorf("%d texts kept after the import and its retry, want 1", n)
	}
}

// SessionTurns (what context.pack reads) answers a session's last turns oldest first,
// across the calls that kept them; a principal bound to another user reads none.
func TestSessionTurnsReadsASessionsLastTurns(t *testing.T) {
	e := newConversationEnv(t)
	ctx := context.Background()
	e.aliceConversation()
	admin := auth.Principal{Org: e.org, Role: auth.RoleAdmin}
	got, err := e.n.Query.SessionTurns(ctx, admin, e.ns, "s2", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Text != "Congratulations on the new family member!" || got[1].Text != "Pixel loves the beach at Cascais." ||
		got[0].Index != 1 || got[1].Index != 2 || got[1].SessionID != "s2" || got[0].Role != "assistant" {
		t.Errorf("the session's last two turns: %+v", got)
	}
	bob := auth.Principal{Org: e.org, Role: auth.RoleAdmin, ReadUserID: "bob"}
	if got, err := e.n.Query.SessionTurns(ctx, bob, e.ns, "s2", 10); err != nil || len(got) != 0 {
		t.Errorf("bob's principal read alice's session: %+v, %v", got, err)
	}
}

// A redaction of a memory forgets the turn it was drawn from (the turn holds the text
// the redaction scrubs), with its data key, and leaves the session's other turns.
func TestRedactionForgetsTheTurnsBehindAMemory(t *testing.T) {
	e := newConversationEnv(t)
	ctx := context.Background()
	s1, _ := e.aliceConversation()
	job := byKey(s1)["user.job"]
	alice := client.Identity{UserID: "alice", SessionID: "s1"}
	// A live head's text is deleted before its version is redacted.
	if _, err := e.tc.Delete(ctx, e.ns, "user.job", alice, ""); err != nil {
		t.Fatal(err)
	}
	a, err := e.tc.Redact(ctx, e.ns, "user.job", client.RedactRequest{Version: job.VersionText, Identity: alice})
	if err != nil {
		t.Fatal(err)
	}
	if a.ForgottenTurns != 1 {
		t.Errorf("the redaction forgot %d turns, want 1", a.ForgottenTurns)
	}
	r, err := e.tc.Recall(ctx, e.ns, client.RecallRequest{Query: "nurse Santa Maria hospital work", TopK: intp(50), Window: intp(5)})
	if err != nil {
		t.Fatal(err)
	}
	kept := false
	for _, h := range r.Hits {
		for _, w := range h.Window {
			if strings.Contains(w.Text, "Santa Maria") {
				t.Errorf("the redacted memory's turn is still recalled: %+v", w)
			}
			kept = kept || w.Text == "Sounds tiring. Where do you work?"
		}
	}
	if !kept {
		t.Errorf("the session's other turns went too: %+v", r)
	}
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.memory_belief_sources WHERE org = $1 AND namespace = $2 AND turn_id = $3`,
		e.org, e.ns, s1.TurnIDs[2]); n != 0 {
		t.Errorf("%d links to the forgotten turn remain", n)
	}
}
