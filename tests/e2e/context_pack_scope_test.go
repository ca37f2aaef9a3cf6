package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/evidence"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// packBody posts a context.pack request and answers its raw body; a status other than
// 200 fails the test.
func packBody(t *testing.T, c *testenv.Client, ns string, req map[string]any) string {
	t.Helper()
	b, _ := json.Marshal(req)
	r := c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/context:pack", b)
	if r.Status != http.StatusOK {
		t.Fatalf("pack %s: %d %s", b, r.Status, r.Body)
	}
	return string(r.Body)
}

// holding names the words body holds.
func holding(body string, words ...string) []string {
	var out []string
	for _, w := range words {
		if strings.Contains(body, w) {
			out = append(out, w)
		}
	}
	return out
}

// keepDigest writes a session digest as the session_digest pass would, ending at the
// turn lastTurn, through the write side's worker API.
func keepDigest(t *testing.T, e *conversationEnv, user, session, lastTurn, text string) {
	t.Helper()
	ok, err := e.n.Command.KeepSessionDigest(context.Background(), evidence.Digest{Org: e.org, Namespace: e.ns, UserID: user,
		SessionID: session, LastTurnID: lastTurn, Turns: 1, Model: "m"}, text)
	if err != nil || !ok {
		t.Fatalf("keep %s's digest of %s: %v, %v", user, session, ok, err)
	}
}

// aliceWords are what alice's conversation (aliceConversation) and her digest say,
// bobWords what bob's do.
var (
	aliceWords = []string{"Santa Maria", "Pixel", "Cascais", "Ana lives in Porto", "night shifts"}
	bobWords   = []string{"Rocket", "bob keeps bees"}
)

// An erasure of a user leaves nothing of theirs in context.pack (facts, recent, the
// session's turns and digest), in search (the memory index and the turns and digest
// legs), in a projection replayed from the topic's first record, nor in the index of a
// process started after it (rebuilt from the topic): bob's are still served by each.
func TestErasureLeavesNothingInPackSearchOrAReplay(t *testing.T) {
	e := newConversationEnv(t)
	s1, _ := e.aliceConversation()
	keepDigest(t, e, "alice", "s1", s1.TurnIDs[3], "Alice works night shifts as a nurse at Santa Maria hospital")
	bobTurns := testenv.PGStrings(t, env.PG(t), `SELECT turn_id::text FROM loom.memory_evidence WHERE org = $1 AND namespace = $2 AND user_id = loom.user_ref(org, 'bob')`, e.org, e.ns)
	keepDigest(t, e, "bob", "b1", bobTurns[0], "Bob says his greyhound Rocket hates the beach")
	if r := e.c.Put(t, e.ns, "hobby", map[string]any{"value": "bob keeps bees on his roof", "user_id": "bob"}); r.Status != http.StatusOK {
		t.Fatalf("bob's fact: %d %s", r.Status, r.Body)
	}
	e.projected()
	packs := func(c *testenv.Client) string {
		var all strings.Builder
		for _, req := range []map[string]any{
			{"query": "where does alice work as a nurse", "user_id": "alice", "session_id": "s1"},
			{"query": "greyhound Pixel beach Cascais", "session_id": "s2"},
			{"query": "nurse greyhound sister Porto bees Rocket", "session_id": "b1", "top_k": 50, "recent": 50},
		} {
			all.WriteString(packBody(t, c, e.ns, req))
		}
		return all.String()
	}
	searches := func(c *testenv.Client) string {
		b, _ := json.Marshal(map[string]any{"query": "nurse Santa Maria greyhound Pixel Cascais Porto bees Rocket night shifts", "top_k": 50, "evidence": true})
		r := c.Do(t, http.MethodPost, "/v1/namespaces/"+e.ns+"/memories:search", b)
		if r.Status != http.StatusOK {
			t.Fatalf("search: %d %s", r.Status, r.Body)
		}
		// The hits and the evidence legs' hits; the answer's explain echoes the query.
		var a struct {
			Hits     json.RawMessage `json:"hits"`
			Evidence json.RawMessage `json:"evidence"`
		}
		if err := json.Unmarshal(r.Body, &a); err != nil {
			t.Fatal(err)
		}
		return string(a.Hits) + string(a.Evidence)
	}
	if got := holding(packs(e.c)+searches(e.c), aliceWords...); len(got) != len(aliceWords) {
		t.Fatalf("before the erasure the packs and search hold only %v of alice's %v", got, aliceWords)
	}

	completed(t, e.c.Erase(t, map[string]any{"user_id": "alice", "namespace": e.ns}))
	after := func(where string, c *testenv.Client) {
		t.Helper()
		p, s := packs(c), searches(c)
		if got := holding(p, aliceWords...); len(got) > 0 {
			t.Errorf("%s: the packs hold alice's %v after her erasure", where, got)
		}
		if got := holding(s, aliceWords...); len(got) > 0 {
			t.Errorf("%s: search holds alice's %v after her erasure", where, got)
		}
		if got := holding(p+s, bobWords...); len(got) != len(bobWords) {
			t.Errorf("%s: bob's %v are no longer all served (found %v)", where, bobWords, got)
		}
	}
	after("the serving process", e.c)

	// A projection replayed from the topic's first record: alice's records are on the
	// topic still, sealed under keys the erasure destroyed, so none of them lands.
	p := strings.ReplaceAll(testenv.Unique(t, "p"), "-", "_")
	env.Projector(t, p)
	gen := testenv.Generation(t, env.PG(t), e.org, e.ns)
	testenv.Eventually(t, 3*time.Minute, "the replayed projection to reach the namespace's generation", func() bool {
		return testenv.Watermark(t, env.PG(t), p, e.org, e.ns) >= gen
	})
	for _, w := range aliceWords {
		for table, n := range testenv.TextRows(t, env.CH(t), e.org, e.ns, w) {
			if n != 0 {
				t.Errorf("after the replay, %s holds %d rows with alice's %q", table, n, w)
			}
		}
	}
	// A process started now builds its index from the topic's first record.
	n, url := env.SharedAPI(t)
	fresh := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: e.org}))
	after("a process started after the erasure", fresh)
}

// A pack reads the session of the user it is for: a session id two users share gives
// each only their own turns and digest, whatever the token; a token bound to alice
// never packs bob's turns or digest (nor with bob's session, nor naming bob), and a
// token bound to one session packs no other session's turns.
func TestContextPackKeepsToItsUsersTurns(t *testing.T) {
	e := newConversationEnv(t)
	ctx := context.Background()
	observe := func(user, session, text string) string {
		t.Helper()
		a, err := e.tc.Observe(ctx, e.ns, client.ObserveRequest{Identity: client.Identity{UserID: user, SessionID: session},
			Turns: []client.ObservedTurn{{Role: "user", Content: text}}})
		if err != nil {
			t.Fatal(err)
		}
		return a.Turns[0].TurnID
	}
	aliceTurn := observe("alice", "shared", "alice is flying to Reykjavik on Friday")
	bobTurn := observe("bob", "shared", "bob's locker code is zanzibar-77")
	observe("bob", "b1", "bob's bank is Banco Verde")
	observe("alice", "other", "alice hides the spare key under the fern")
	keepDigest(t, e, "alice", "shared", aliceTurn, "Alice plans a trip to Reykjavik")
	keepDigest(t, e, "bob", "shared", bobTurn, "Bob shared his locker code zanzibar-77")
	bobs := []string{"zanzibar", "Banco Verde"}

	// An admin's pack for alice holds her turn and digest of the shared session, not bob's.
	p := packBody(t, e.c, e.ns, map[string]any{"user_id": "alice", "session_id": "shared"})
	if !strings.Contains(p, "Reykjavik on Friday") || !strings.Contains(p, "trip to Reykjavik") || len(holding(p, bobs...)) > 0 {
		t.Errorf("an admin's pack for alice of the shared session:\n%s", p)
	}
	// Unbound and naming no user, the session is every user's.
	if p := packBody(t, e.c, e.ns, map[string]any{"session_id": "shared"}); !strings.Contains(p, "zanzibar") || !strings.Contains(p, "Reykjavik") {
		t.Errorf("an admin's pack of the shared session for no user in particular:\n%s", p)
	}

	bound := testenv.NewClient(e.url, env.Token(t, e.n, auth.NewToken{Org: e.org, Role: auth.RoleReader, ReadUserID: "alice"}))
	for _, req := range []map[string]any{
		{"session_id": "shared"}, {"session_id": "shared", "format": "json"}, {"session_id": "b1"},
		{"session_id": "shared", "user_id": "bob"}, {"session_id": "b1", "user_id": "bob", "query": "locker code bank"},
	} {
		if got := holding(packBody(t, bound, e.ns, req), bobs...); len(got) > 0 {
			t.Errorf("a token bound to alice packed bob's %v with %v", got, req)
		}
		b, _ := json.Marshal(req)
		if r := bound.Do(t, http.MethodPost, "/v1/namespaces/"+e.ns+"/context:stack", b); r.Status != http.StatusOK || len(holding(string(r.Body), bobs...)) > 0 {
			t.Errorf("memory.stack with a token bound to alice and %v: %d %s", req, r.Status, r.Body)
		}
	}
	if p := packBody(t, bound, e.ns, map[string]any{"session_id": "shared"}); !strings.Contains(p, "Reykjavik on Friday") {
		t.Errorf("a token bound to alice does not pack her own turn:\n%s", p)
	}

	session := testenv.NewClient(e.url, env.Token(t, e.n, auth.NewToken{Org: e.org, Role: auth.RoleReader, ReadUserID: "alice", ReadSessionID: "shared"}))
	if p := packBody(t, session, e.ns, map[string]any{"session_id": "other"}); strings.Contains(p, "fern") {
		t.Errorf("a token bound to the shared session packed another session's turn:\n%s", p)
	}
	if p := packBody(t, session, e.ns, map[string]any{"session_id": "shared"}); !strings.Contains(p, "Reykjavik on Friday") || len(holding(p, bobs...)) > 0 {
		t.Errorf("a token bound to alice's shared session:\n%s", p)
	}
}

// context.pack with the model provider down (the embedder refusing every request, the
// chat model answering 503) still answers: the layers read from the authority (recent
// changes, the session's turns) are whole, the facts and knowledge layers are empty and
// say the embedder is down, and the session says it has no digest; memory.stack too.
// Search alone answers 503 EMBEDDER_UNAVAILABLE, which the pack must not.
func TestContextPackAnswersWithTheProviderDown(t *testing.T) {
	srv := llmtest.New(t)
	n, url := env.API(t, func(c *config.Config) {
		withProvider(srv)(c)
		c.Embedder.Kind, c.Embedder.OpenAI.BaseURL, c.Embedder.OpenAI.Model, c.Embedder.Dim = "openai", srv.URL, "scripted-embedder", 16
	})
	org := testenv.Unique(t, "org")
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	tc := c.Typed(t)
	ctx := context.Background()
	ns := testenv.Unique(t, "down")
	if r := c.Put(t, ns, "drink", map[string]any{"value": "alice drinks green tea every morning", "user_id": "alice"}); r.Status != http.StatusOK {
		t.Fatalf("set: %d %s", r.Status, r.Body)
	}
	if _, err := tc.Observe(ctx, ns, client.ObserveRequest{Identity: client.Identity{UserID: "alice", SessionID: "s1"},
		Turns: []client.ObservedTurn{{Role: "user", Content: "I am flying to Reykjavik on Friday"}}}); err != nil {
		t.Fatal(err)
	}
	policy := "Travel over 500 euros needs a manager's approval before booking."
	if _, err := tc.AddDocument(ctx, ns, client.DocumentInput{SourceURI: "handbook/travel.txt", Content: &policy}); err != nil {
		t.Fatalf("add document: %v", err)
	}
	testenv.WaitProjected(t, env.PG(t), "main", org, ns)
	req := client.PackRequest{Query: "what does alice drink and who approves travel", UserID: "alice", SessionID: "s1"}
	if up, err := tc.Pack(ctx, ns, req); err != nil || !strings.Contains(up.Block, "green tea") || !strings.Contains(up.Block, "manager's approval") {
		t.Fatalf("the pack with the provider up: %+v, %v", up, err)
	}

	// Another question: the process keeps the vectors of the questions it embedded.
	req.Query = "alice's drink, travel approval"
	srv.EmbedDown(true)
	srv.Script(func(llmtest.ChatRequest) llmtest.Reply {
		return llmtest.Status(http.StatusServiceUnavailable, "the model is down")
	})
	if _, err := tc.Search(ctx, ns, client.SearchRequest{Query: "what does alice drink in the morning", TopK: 5}); !isCode(err, client.CodeEmbedderUnavailable) {
		t.Fatalf("search with the embedder down: %v, want 503 EMBEDDER_UNAVAILABLE", err)
	}
	a, err := tc.Pack(ctx, ns, req)
	if err != nil {
		t.Fatalf("the pack with the provider down: %v", err)
	}
	sections := map[string]client.PackSection{}
	for _, s := range a.Sections {
		sections[s.Name] = s
	}
	for _, name := range []string{"facts", "knowledge"} {
		if s := sections[name]; s.Available || len(s.Lines) != 0 || !strings.Contains(s.Note, "embedder is down") {
			t.Errorf("the %s layer with the embedder down: %+v", name, s)
		}
	}
	if s := sections["session"]; !s.Available || s.Note != "the session has no digest" || len(s.Lines) != 1 || !strings.Contains(s.Lines[0].Text, "Reykjavik") {
		t.Errorf("the session layer: %+v", s)
	}
	if s := sections["recent"]; len(s.Lines) == 0 || !strings.Contains(a.Block, "green tea") {
		t.Errorf("the recent layer: %+v\n%s", s, a.Block)
	}
	if st, err := tc.Stack(ctx, ns, req); err != nil || st.Tokens != a.Tokens {
		t.Errorf("memory.stack with the provider down: %+v, %v", st, err)
	}
}
