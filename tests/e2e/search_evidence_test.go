package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// evidenceOn asks a search for its evidence legs.
var evidenceOn = true

// evidenceLeg is the explain block's account of one evidence leg.
func evidenceLeg(t *testing.T, a *client.SearchAnswer, leg string) client.EvidenceLeg {
	t.Helper()
	if a.Explain == nil {
		t.Fatalf("no explain block: %+v", a)
	}
	for _, l := range a.Explain.EvidenceLegs {
		if l.Leg == leg {
			return l
		}
	}
	t.Fatalf("no %s leg in the explain block: %+v", leg, a.Explain.EvidenceLegs)
	return client.EvidenceLeg{}
}

// A conversation observed in several calls, then searched: the turns leg finds the
// verbatim chunk that answers, cites its chunk and turns, and brings its neighbour
// window, the turns of the calls before and after it; the hit is not a memory hit. A
// token bound to alice never finds bob's chunk, and evidence: false leaves the legs off.
func TestSearchFindsTheVerbatimChunkWithItsWindow(t *testing.T) {
	e := newConversationEnv(t)
	ctx := context.Background()
	alice := client.Identity{UserID: "alice", SessionID: "walk"}
	for _, turns := range [][]client.ObservedTurn{
		{{Role: "user", Content: "Back from the morning walk."}, {Role: "assistant", Content: "How was it?"}},
		{{Role: "user", Content: "We adopted a greyhound called Pixel yesterday.", Speaker: "Alice"}},
		{{Role: "assistant", Content: "Congratulations on the new family member!"}, {Role: "user", Content: "Thanks, we are thrilled."}},
	} {
		if _, err := e.tc.Observe(ctx, e.ns, client.ObserveRequest{Identity: alice, Turns: turns}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.tc.Observe(ctx, e.ns, client.ObserveRequest{Identity: client.Identity{UserID: "bob", SessionID: "b1"},
		Turns: []client.ObservedTurn{{Role: "user", Content: "My greyhound Rocket hates the beach."}}}); err != nil {
		t.Fatal(err)
	}
	chunks := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.memory_chunks WHERE org = $1 AND namespace = $2`, e.org, e.ns)
	links := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.memory_chunk_sources WHERE org = $1 AND namespace = $2`, e.org, e.ns)
	if chunks != 4 || links != 6 {
		t.Fatalf("%d chunks and %d lineage links kept, want 4 (one a call) and 6 (one a turn)", chunks, links)
	}

	// The legs are opt-in: a search that does not ask runs none; the namespace's
	// retrieval_defaults turn them on for every search of it.
	plain, err := e.alice.Search(ctx, e.ns, client.SearchRequest{Query: "what is the greyhound called"})
	if err != nil || plain.Evidence != nil || len(plain.Explain.EvidenceLegs) != 0 {
		t.Fatalf("a search that did not ask ran the evidence legs: %+v, %v", plain.Evidence, err)
	}
	e.c.Configure(t, e.ns, map[string]any{"retrieval_defaults": map[string]any{"evidence": true}})
	a, err := e.alice.Search(ctx, e.ns, client.SearchRequest{Query: "what is the greyhound called"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Evidence == nil || len(a.Evidence.Hits) == 0 {
		t.Fatalf("no evidence: %+v", a.Evidence)
	}
	h := a.Evidence.Hits[0]
	if h.Kind != "chunk" || h.Text != "Alice: We adopted a greyhound called Pixel yesterday." || h.SessionID != "walk" ||
		h.UserID != "alice" || len(h.TurnIDs) != 1 || h.Cite != "c:"+h.ChunkID || h.FirstIndex != 2 || h.LastIndex != 2 {
		t.Fatalf("the chunk hit: %+v", h)
	}
	if got := strings.Join(texts(h.Window), " | "); got != "Back from the morning walk. | How was it? | We adopted a greyhound called Pixel yesterday. | "+
		"Congratulations on the new family member! | Thanks, we are thrilled." {
		t.Errorf("the neighbour window: %s", got)
	}
	if h.Window[2].TurnID != h.TurnIDs[0] {
		t.Errorf("the chunk's turn %s is not its window's middle turn %s", h.TurnIDs[0], h.Window[2].TurnID)
	}
	for _, eh := range a.Evidence.Hits {
		if eh.UserID != "alice" || strings.Contains(eh.Text, "Rocket") {
			t.Errorf("a token bound to alice found %+v", eh)
		}
	}
	for _, m := range a.Hits {
		if strings.Contains(string(m.Value), "Pixel") {
			t.Errorf("a turn served as a memory hit: %+v", m)
		}
	}
	turns := evidenceLeg(t, a, "turns")
	if !turns.Ran || turns.Scanned != 3 || turns.Matched != 1 || turns.Served != 1 {
		t.Errorf("the turns leg's account: %+v", turns)
	}
	if d := evidenceLeg(t, a, "digests"); !d.Ran || d.Served != 0 || d.Note == "" {
		t.Errorf("the digest leg's account with no digest: %+v", d)
	}

	// Unbound, bob's chunk is found too.
	all, err := e.tc.Search(ctx, e.ns, client.SearchRequest{Query: "greyhound"})
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, eh := range all.Evidence.Hits {
		users = append(users, eh.UserID)
	}
	if strings.Join(users, ",") != "alice,bob" && strings.Join(users, ",") != "bob,alice" {
		t.Errorf("an unbound search's evidence: %v", users)
	}
	off := false
	none, err := e.tc.Search(ctx, e.ns, client.SearchRequest{Query: "greyhound", Evidence: &off})
	if err != nil || none.Evidence != nil || len(none.Explain.EvidenceLegs) != 0 {
		t.Errorf("evidence: false ran the legs: %+v, %v", none.Evidence, err)
	}
}

// The page assembler's caps cut a search's page: per_key keeps one hit of a key,
// per_session one of a session, max_tokens what fits the budget counted with the
// tokenizer; each cut is reported with its citation and reason, and the kept hits
// and the cuts together are the uncapped page. A namespace with no turns runs no
// evidence leg, and says so. Bad caps are refused naming the field.
func TestSearchCapsCutThePageAndReportIt(t *testing.T) {
	e := newPhaseEnv(t, map[string]any{"conflict_policy": "append_only"})
	for _, r := range []struct {
		key, session, value string
	}{
		{"pet.name", "s1", "the hamster is called Biscuit and sleeps all day"},
		{"pet.name", "s2", "the hamster was renamed Crumble after the move"},
		{"pet.name", "s3", "the hamster answers to Biscuit or Crumble"},
		{"pet.food", "s1", "the hamster eats sunflower seeds and carrots"},
		{"pet.toy", "s1", "the hamster runs on a silent wheel every night"},
	} {
		typedSet(t, e.c, e.ns, r.key, client.SetRequest{Value: r.value, Identity: client.Identity{UserID: "alice", SessionID: r.session}})
	}
	all := typedSearch(t, e.c, e.ns, client.SearchRequest{Query: "hamster", TopK: 10, Evidence: &evidenceOn})
	if len(all.Hits) != 5 || all.Budget != nil {
		t.Fatalf("the uncapped page: %d hits, budget %+v", len(all.Hits), all.Budget)
	}
	if all.Evidence == nil || len(all.Evidence.Hits) != 0 {
		t.Errorf("evidence of a namespace with no turns: %+v", all.Evidence)
	}
	for _, leg := range []string{"turns", "digests"} {
		if l := evidenceLeg(t, all, leg); l.Ran || l.Note != "the scope keeps no turns" {
			t.Errorf("the %s leg of a namespace with no turns: %+v", leg, l)
		}
	}
	reasons := func(a *client.SearchAnswer) map[string]int {
		out := map[string]int{}
		for _, c := range a.Budget.Cut {
			out[c.Reason]++
			if !strings.HasPrefix(c.Cite, "m:") || c.Kind != "memory" || c.Tokens <= 0 {
				t.Errorf("a cut: %+v", c)
			}
		}
		return out
	}

	perKey := typedSearch(t, e.c, e.ns, client.SearchRequest{Query: "hamster", TopK: 10, PerKey: 1})
	names := 0
	for _, h := range perKey.Hits {
		if h.MemoryKey == "pet.name" {
			names++
		}
	}
	if names != 1 || len(perKey.Hits) != 3 || reasons(perKey)["per_key"] != 2 {
		t.Errorf("per_key 1: %d hits (%d of pet.name), cut %+v", len(perKey.Hits), names, perKey.Budget.Cut)
	}
	for _, c := range perKey.Budget.Cut {
		if c.MemoryKey != "pet.name" {
			t.Errorf("per_key cut another key: %+v", c)
		}
	}

	perSession := typedSearch(t, e.c, e.ns, client.SearchRequest{Query: "hamster", TopK: 10, PerSession: 1})
	sessions := map[string]int{}
	for _, h := range perSession.Hits {
		sessions[h.SessionID]++
	}
	if len(perSession.Hits) != 3 || sessions["s1"] != 1 || reasons(perSession)["per_session"] != 2 {
		t.Errorf("per_session 1: sessions %v, cut %+v", sessions, perSession.Budget.Cut)
	}

	budget := typedSearch(t, e.c, e.ns, client.SearchRequest{Query: "hamster", TopK: 10, MaxTokens: 25, Tokenizer: "cl100k_base"})
	b := budget.Budget
	if b == nil || b.Tokens > 25 || b.Tokens == 0 || b.Tokenizer.Encoding != "cl100k_base" || b.MaxTokens != 25 {
		t.Fatalf("the budget's account: %+v", b)
	}
	if len(budget.Hits) == 0 || len(budget.Hits) >= 5 || len(budget.Hits)+reasons(budget)["budget"] != 5 {
		t.Errorf("max_tokens 25: %d hits kept, cut %+v", len(budget.Hits), b.Cut)
	}
	if budget.Hits[0].MemoryID != all.Hits[0].MemoryID {
		t.Errorf("the budget cut the best hit: %s, want %s first", budget.Hits[0].MemoryID, all.Hits[0].MemoryID)
	}

	for _, bad := range []struct{ body, field string }{
		{`{"query": "hamster", "max_tokens": 0}`, "max_tokens"},
		{`{"query": "hamster", "max_tokens": 300000}`, "max_tokens"},
		{`{"query": "hamster", "per_key": 0}`, "per_key"},
		{`{"query": "hamster", "per_session": -1}`, "per_session"},
		{`{"query": "hamster", "tokenizer": "gpt2"}`, "tokenizer"},
	} {
		r := e.c.Do(t, http.MethodPost, "/v1/namespaces/"+e.ns+"/memories:search", []byte(bad.body))
		var body map[string]any
		_ = json.Unmarshal(r.Body, &body)
		if r.Status != http.StatusUnprocessableEntity || errorField(body) != bad.field {
			t.Errorf("%s: %d %s", bad.body, r.Status, r.Body)
		}
	}
}

// An erasure of a user takes the chunks cut from their turns and the chunks' lineage:
// the census counts them, and a search finds none of their chunks after.
func TestErasureRemovesTheChunks(t *testing.T) {
	e := newConversationEnv(t)
	ctx := context.Background()
	e.aliceConversation()
	pool := env.PG(t)
	count := func(table, user string) int64 {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.`+table+` WHERE org = $1 AND namespace = $2 AND user_id = loom.user_ref($1, $3)`, e.org, e.ns, user)
	}
	chunks, links := count("memory_chunks", "alice"), count("memory_chunk_sources", "alice")
	if chunks == 0 || links != 9 {
		t.Fatalf("before the erasure: %d chunks, %d links (want one a turn: 9)", chunks, links)
	}
	before, err := e.tc.Search(ctx, e.ns, client.SearchRequest{Query: "greyhound nurse Porto", TopK: 20, Evidence: &evidenceOn})
	if err != nil || before.Evidence == nil || len(before.Evidence.Hits) < 2 {
		t.Fatalf("the evidence before the erasure: %+v, %v", before.Evidence, err)
	}
	view := e.c.Erase(t, map[string]any{"user_id": "alice", "namespace": e.ns})
	completed(t, view)
	if count("memory_chunks", "alice") != 0 || count("memory_chunk_sources", "alice") != 0 || count("memory_chunks", "bob") != 1 {
		t.Errorf("after the erasure: alice %d chunks, %d links; bob %d chunks", count("memory_chunks", "alice"),
			count("memory_chunk_sources", "alice"), count("memory_chunks", "bob"))
	}
	removed, _ := view["removed"].(map[string]any)
	if removed["loom.memory_chunks"] != float64(chunks) || removed["loom.memory_chunk_sources"] != float64(links) {
		t.Errorf("the saga's account of what it removed: %v", view["removed"])
	}
	after, err := e.tc.Search(ctx, e.ns, client.SearchRequest{Query: "greyhound nurse Porto", TopK: 20, Evidence: &evidenceOn})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range after.Evidence.Hits {
		if h.UserID == "alice" {
			t.Errorf("an erased chunk found: %+v", h)
		}
	}
}

// The digest leg finds a session's digest and cites the session; a redaction of a
// memory drawn from a turn forgets the chunk cut from that turn with the turn, so the
// turns leg no longer finds it.
func TestSearchFindsTheDigestAndARedactionForgetsTheChunk(t *testing.T) {
	workersFromNow(t)
	e := newConversationEnv(t)
	ctx := context.Background()
	s1, _ := e.aliceConversation()
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
	defer stop()
	testenv.Eventually(t, 30*time.Second, "the digest of alice's first session", func() bool {
		r := e.c.Do(t, http.MethodGet, "/v1/namespaces/"+e.ns+"/sessions/s1/digest", nil)
		return r.Status == http.StatusOK && strings.Contains(string(r.Body), "Santa Maria")
	})
	a, err := e.alice.Search(ctx, e.ns, client.SearchRequest{Query: "night shifts hospital", TopK: 10, Evidence: &evidenceOn})
	if err != nil {
		t.Fatal(err)
	}
	var digest, chunk *client.EvidenceHit
	for i, h := range a.Evidence.Hits {
		switch {
		case h.Kind == "digest" && h.SessionID == "s1" && digest == nil:
			digest = &a.Evidence.Hits[i]
		case h.Kind == "chunk" && h.SessionID == "s1" && chunk == nil:
			chunk = &a.Evidence.Hits[i]
		}
	}
	if digest == nil || digest.Cite != "s:s1" || !strings.Contains(digest.Text, "Santa Maria") || digest.Scores["digests"] <= 0 {
		t.Fatalf("the digest hit: %+v in %+v", digest, a.Evidence.Hits)
	}
	if chunk == nil || len(chunk.TurnIDs) != 4 || !strings.Contains(chunk.Text, "Alice: I work as a nurse at Santa Maria hospital.") {
		t.Fatalf("the chunk hit: %+v", chunk)
	}
	if d := evidenceLeg(t, a, "digests"); !d.Ran || d.Served == 0 {
		t.Errorf("the digest leg's account: %+v", d)
	}

	alice := client.Identity{UserID: "alice", SessionID: "s1"}
	if _, err := e.tc.Delete(ctx, e.ns, "user.job", alice, ""); err != nil {
		t.Fatal(err)
	}
	if r, err := e.tc.Redact(ctx, e.ns, "user.job", client.RedactRequest{Version: byKey(s1)["user.job"].VersionText, Identity: alice}); err != nil || r.ForgottenTurns != 1 {
		t.Fatalf("the redaction: %+v, %v", r, err)
	}
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.memory_chunks WHERE org = $1 AND namespace = $2 AND chunk_id = $3`,
		e.org, e.ns, chunk.ChunkID); n != 0 {
		t.Errorf("the chunk of the redacted turn is kept")
	}
	after, err := e.alice.Search(ctx, e.ns, client.SearchRequest{Query: "nurse Santa Maria hospital", TopK: 10, Evidence: &evidenceOn})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range after.Evidence.Hits {
		if strings.Contains(h.Text, "Santa Maria") {
			t.Errorf("the redacted turn's text found after the redaction: %+v", h)
		}
	}
}
