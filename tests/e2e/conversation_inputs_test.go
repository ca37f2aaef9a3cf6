package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// failTurnWrites makes Postgres refuse every turn written into ns until the returned
// func is called: a stand-in for the process dying, or the store failing, between a
// fact's commit and its turns'.
func failTurnWrites(t *testing.T, ns string) (restore func()) {
	t.Helper()
	pool := env.PG(t)
	ctx := context.Background()
	fn := strings.ReplaceAll(testenv.Unique(t, "fail_turns"), "-", "_")
	stmts := []string{
		fmt.Sprintf(`CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN IF NEW.namespace = %s THEN RAISE EXCEPTION 'turn writes fail in this test'; END IF; RETURN NEW; END $$`,
			fn, quoteLiteral(ns)),
		fmt.Sprintf(`CREATE TRIGGER %s BEFORE INSERT ON loom.memory_evidence FOR EACH ROW EXECUTE FUNCTION %s()`, fn, fn),
	}
	for _, s := range stmts {
		testenv.Exec(t, pool, s)
	}
	done := false
	restore = func() {
		if done {
			return
		}
		done = true
		if _, err := pool.Exec(ctx, fmt.Sprintf(`DROP TRIGGER IF EXISTS %s ON loom.memory_evidence; DROP FUNCTION IF EXISTS %s()`, fn, fn)); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(restore)
	return restore
}

func quoteLiteral(s string) string { return "'" + s + "'" }

// memory.set_from_messages commits the facts it draws and the turns they were drawn
// from together: when the turns cannot be kept, no fact is kept either (the call
// fails and may be retried), so no memory is ever stored without its evidence. The
// retry keeps the fact and its turns once, and recall by the fact's key finds them.
func TestFromMessagesKeepsNoFactWithoutItsTurns(t *testing.T) {
	e := newConversationEnv(t)
	ctx := context.Background()
	alice := client.Identity{UserID: "alice", SessionID: "s1"}
	msgs := []client.Message{
		{Role: "user", Content: "I moved to Lisbon last spring.", At: at(3, 9)},
		{Role: "assistant", Content: "How are you finding it?", At: at(3, 9)},
	}
	e.srv.ReplyWhen(isExtraction,
		extracted([]said{{"user.city", "Lives in Lisbon", 0}}),
		extracted([]said{{"user.city", "Lives in Lisbon", 0}}))

	restore := failTurnWrites(t, e.ns)
	_, err := e.tc.FromMessages(ctx, e.ns, client.FromMessagesRequest{Identity: alice, Messages: msgs})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status < 500 {
		t.Fatalf("fromMessages with the turns' write failing: %v, want a 5xx and nothing kept", err)
	}
	pool := env.PG(t)
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_current WHERE org = $1 AND namespace = $2`, e.org, e.ns); n != 0 {
		t.Fatalf("%d facts kept with no turns behind them", n)
	}
	if _, err := e.tc.Get(ctx, e.ns, "user.city", alice, time.Time{}); !errors.As(err, &ce) || ce.Status != 404 {
		t.Errorf("the fact with no evidence is readable: %v", err)
	}

	restore()
	ans, err := e.tc.FromMessages(ctx, e.ns, client.FromMessagesRequest{Identity: alice, Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	if len(ans.TurnIDs) != 2 || byKey(ans)["user.city"].MemoryID == "" {
		t.Fatalf("the retry: %+v", ans)
	}
	rec, err := e.tc.Recall(ctx, e.ns, client.RecallRequest{Key: "user.city", Identity: alice, Window: intp(0)})
	if err != nil || len(rec.Hits) != 1 || rec.Hits[0].Text != "I moved to Lisbon last spring." || rec.Hits[0].TurnID != ans.TurnIDs[0] {
		t.Fatalf("recall by the fact's key: %+v, %v", rec, err)
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_evidence WHERE org = $1 AND namespace = $2`, e.org, e.ns); n != 2 {
		t.Errorf("%d turns kept, want the transcript's 2, once", n)
	}
}

// observe.crystallize turns a session's observed turns into facts through the
// extraction: the facts are linked to the very turns memory.observe kept (recall by a
// fact's key finds its turn; no turn is kept twice), a second call reads only the
// turns observed since (no model call when there are none), and a token bound to one
// user cannot crystallize another's session.
func TestCrystallizeObservedTurns(t *testing.T) {
	e := newConversationEnv(t)
	ctx := context.Background()
	alice := client.Identity{UserID: "alice", SessionID: "walk"}
	observed, err := e.tc.Observe(ctx, e.ns, client.ObserveRequest{Identity: alice, Turns: []client.ObservedTurn{
		{Role: "user", Content: "Out walking the dog before work.", At: at(4, 7)},
		{Role: "assistant", Content: "What is your dog called?", At: at(4, 7)},
		{Role: "user", Content: "She is a beagle called Miso.", At: at(4, 7), Speaker: "Alice"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	e.srv.ReplyWhen(isExtraction,
		extracted([]said{{"user.dog", "Has a beagle called Miso", 2}}),
		extracted(nil))

	first, err := e.alice.Crystallize(ctx, e.ns, client.CrystallizeRequest{Identity: alice})
	if err != nil {
		t.Fatal(err)
	}
	dog := byKey(&first.FromMessagesAnswer)["user.dog"]
	if first.Crystallized != 3 || first.More || dog.MemoryID == "" || dog.MessageIndex != 2 {
		t.Fatalf("crystallize: %+v", first)
	}
	if len(first.TurnIDs) != 3 || first.TurnIDs[2] != observed.Turns[2].TurnID {
		t.Errorf("the turns read: %v, want the observed %+v", first.TurnIDs, observed.Turns)
	}
	rec, err := e.tc.Recall(ctx, e.ns, client.RecallRequest{Key: "user.dog", Identity: alice, Window: intp(0)})
	if err != nil || len(rec.Hits) != 1 || rec.Hits[0].TurnID != observed.Turns[2].TurnID || rec.Hits[0].Speaker != "Alice" {
		t.Fatalf("recall by the crystallized fact's key: %+v, %v", rec, err)
	}
	pool := env.PG(t)
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_evidence WHERE org = $1 AND namespace = $2`, e.org, e.ns); n != 3 {
		t.Errorf("%d turns in the record, want the 3 observed (none kept twice)", n)
	}

	chats := len(e.srv.Chats())
	again, err := e.alice.Crystallize(ctx, e.ns, client.CrystallizeRequest{Identity: alice})
	if err != nil || again.Crystallized != 0 || len(again.Facts) != 0 || len(e.srv.Chats()) != chats {
		t.Errorf("a second crystallize with nothing observed since: %+v, %v (%d model calls)", again, err, len(e.srv.Chats())-chats)
	}
	if _, err := e.tc.Observe(ctx, e.ns, client.ObserveRequest{Identity: alice, Turns: []client.ObservedTurn{
		{Role: "user", Content: "Back home now."}}}); err != nil {
		t.Fatal(err)
	}
	later, err := e.alice.Crystallize(ctx, e.ns, client.CrystallizeRequest{Identity: alice})
	if err != nil || later.Crystallized != 1 || len(later.TurnIDs) != 1 {
		t.Errorf("crystallize after one more turn: %+v, %v", later, err)
	}

	var ce *client.Error
	if _, err := e.alice.Crystallize(ctx, e.ns, client.CrystallizeRequest{Identity: client.Identity{UserID: "bob", SessionID: "walk"}}); !errors.As(err, &ce) || ce.Status != 403 {
		t.Errorf("alice's token crystallizing bob's session: %v", err)
	}
	if _, err := e.tc.Crystallize(ctx, e.ns, client.CrystallizeRequest{Identity: alice, Steps: []string{"loom.nope"}}); !errors.As(err, &ce) || ce.Status != 422 || ce.Field != "steps" {
		t.Errorf("an unknown step: %v", err)
	}
}

// With LOOM_EXTRACTION_KEEP_INPUTS off, memory.set_from_messages keeps the facts it
// draws and nothing of the transcript: no turn id in the answer, no turn, chunk or
// belief-source row, and recall by the fact's key finds no turn.
func TestFromMessagesWithoutItsInputsKeepsTheFactsAlone(t *testing.T) {
	srv := llmtest.New(t)
	n, url := env.API(t, func(c *config.Config) {
		withProvider(srv)(c)
		c.Command.Extraction.QueueEnabled = false
		c.Command.Extraction.KeepInputs = false
	})
	org, ns := testenv.Unique(t, "org"), testenv.Unique(t, "noinputs")
	tc := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org})).Typed(t)
	ctx := context.Background()
	alice := client.Identity{UserID: "alice", SessionID: "s1"}
	srv.ReplyWhen(isExtraction, extracted([]said{{"user.city", "Lives in Lisbon", 0}}))
	ans, err := tc.FromMessages(ctx, ns, client.FromMessagesRequest{Identity: alice, Messages: []client.Message{
		{Role: "user", Content: "I moved to Lisbon last spring."}, {Role: "assistant", Content: "How are you finding it?"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ans.TurnIDs) != 0 || byKey(ans)["user.city"].MemoryID == "" {
		t.Fatalf("the answer: %+v, want the fact and no turns", ans)
	}
	if m, err := tc.Get(ctx, ns, "user.city", alice, time.Time{}); err != nil || string(m.Value) != `"Lives in Lisbon"` {
		t.Fatalf("the fact: %+v, %v", m, err)
	}
	pool := env.PG(t)
	if left := testenv.Int(t, pool, `SELECT (SELECT count(*) FROM loom.memory_evidence WHERE org = $1 AND namespace = $2)
		+ (SELECT count(*) FROM loom.memory_belief_sources WHERE org = $1 AND namespace = $2)
		+ (SELECT count(*) FROM loom.memory_chunks WHERE org = $1 AND namespace = $2)`, org, ns); left != 0 {
		t.Errorf("%d rows of the transcript kept", left)
	}
	rec, err := tc.Recall(ctx, ns, client.RecallRequest{Key: "user.city", Identity: alice})
	if err != nil || len(rec.Hits) != 0 {
		t.Errorf("recall by the fact's key: %+v, %v; want no turns", rec, err)
	}
}
