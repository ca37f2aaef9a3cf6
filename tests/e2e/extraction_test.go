package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// extractionEnv is a Loom with a scripted model provider, and an org's admin client.
type extractionEnv struct {
	t   *testing.T
	srv *llmtest.Server
	n   *app.Process
	url string
	c   *testenv.Client
	tc  *client.Client
	ns  string
}

// withProvider points a process at the scripted provider: one attempt per call, so a
// provider's failure reaches Loom as it is.
func withProvider(srv *llmtest.Server) func(*config.Config) {
	return func(c *config.Config) {
		c.LLM.BaseURL, c.LLM.Model, c.LLM.MaxAttempts = srv.URL, "m", 1
	}
}

func newExtractionEnv(t *testing.T, mod func(*config.Config), opts ...app.Option) *extractionEnv {
	t.Helper()
	srv := llmtest.New(t)
	n, url := env.API(t, func(c *config.Config) {
		withProvider(srv)(c)
		c.Command.Extraction.QueueEnabled = false
		if mod != nil {
			mod(c)
		}
	}, opts...)
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: testenv.Unique(t, "org")}))
	return &extractionEnv{t: t, srv: srv, n: n, url: url, c: c, tc: c.Typed(t), ns: testenv.Unique(t, "x")}
}

// said is one fact of a scripted extraction answer.
type said struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	Msg   int    `json:"message_index"`
}

// extracted is a scripted extraction answer: the facts, and the keys to forget.
func extracted(facts []said, forget ...string) llmtest.Reply {
	fs := []any{}
	for _, f := range facts {
		fs = append(fs, map[string]any{"key": f.Key, "value": f.Value, "message_index": f.Msg, "tags": []any{}, "about": "user"})
	}
	gs := []any{}
	for _, k := range forget {
		gs = append(gs, map[string]any{"key": k, "message_index": 0})
	}
	return llmtest.JSON(map[string]any{"facts": fs, "forget": gs})
}

func isExtraction(r llmtest.ChatRequest) bool   { return r.SchemaName == "extracted_facts" }
func isVerification(r llmtest.ChatRequest) bool { return r.SchemaName == "durable_facts" }

func (e *extractionEnv) set(key string, body map[string]any) *client.SetAnswer {
	e.t.Helper()
	r := e.c.Put(e.t, e.ns, key, body)
	if r.Status != http.StatusOK {
		e.t.Fatalf("PUT %s: %d %s", key, r.Status, r.Body)
	}
	var a client.SetAnswer
	json.Unmarshal(r.Body, &a)
	return &a
}

// projected waits until search reads every write (the nearest memories the extractor
// is shown are read from the search documents).
func (e *extractionEnv) projected() {
	e.t.Helper()
	if _, err := e.tc.Search(context.Background(), e.ns, client.SearchRequest{Query: "x"}); err != nil {
		e.t.Fatal(err)
	}
}

func messages(texts ...string) []client.Message {
	var out []client.Message
	for i, s := range texts {
		role := "user"
		if strings.HasPrefix(s, "assistant: ") {
			role, s = "assistant", strings.TrimPrefix(s, "assistant: ")
		}
		_ = i
		out = append(out, client.Message{Role: role, Content: s})
	}
	return out
}

func byKey(a *client.FromMessagesAnswer) map[string]client.ExtractedFact {
	out := map[string]client.ExtractedFact{}
	for _, f := range a.Facts {
		out[f.Key] = f
	}
	return out
}

// A transcript in, facts out, each judged as any write: a restatement merges into the
// memory that holds it, a new value of a stored attribute revises its key, and a
// contradiction of another memory conflicts with it.
func TestFromMessagesJudgesEveryFact(t *testing.T) {
	e := newExtractionEnv(t, nil)
	alice := client.Identity{UserID: "alice"}
	e.set("user.home_city", map[string]any{"value": "Lives in Lisbon", "user_id": "alice"})
	sushi := e.set("food.favourite", map[string]any{"value": "The user's favourite food is sushi", "user_id": "alice"})
	cat := e.set("user.pet", map[string]any{"value": "Has a cat named Miso", "user_id": "alice"})
	e.projected()
	e.srv.ReplyWhen(isExtraction, extracted([]said{
		{"user.home_city.porto", "Lives in Porto", 0},                    // the value is cut out of the key
		{"user.pet", "Has a cat named Miso", 2},                          // said again
		{"user.favourite_food", "The user's favourite food is pizza", 3}, // says otherwise than food.favourite
	}))
	a, err := e.tc.FromMessages(context.Background(), e.ns, client.FromMessagesRequest{Identity: alice,
		Messages: messages("I moved to Porto last month.", "assistant: Noted!", "I still have my cat Miso.", "Actually my favourite food is pizza.")})
	if err != nil {
		t.Fatal(err)
	}
	got := byKey(a)
	if f := got["user.home_city"]; f.Verdict != "new" || !f.Revised || f.MessageIndex != 0 || f.MemoryID == "" {
		t.Errorf("the update: %+v, want a revision of user.home_city", f)
	}
	if f := got["user.pet"]; f.Verdict != "merge" || f.MergedInto != cat.MemoryID || f.DroppedBy != "loom.hash_dedup" {
		t.Errorf("the restatement: %+v, want merged into %s", f, cat.MemoryID)
	}
	if f := got["user.favourite_food"]; f.Verdict != "conflict" || len(f.ConflictWith) != 1 || f.ConflictWith[0] != sushi.MemoryID {
		t.Errorf("the contradiction: %+v, want a conflict with %s", f, sushi.MemoryID)
	}
	if len(a.Facts) != 3 || a.ModelCalls != 1 || len(a.Steps) != 10 || a.Usage.PromptTokens == 0 {
		t.Errorf("answer %+v", a)
	}
	ctx := context.Background()
	if m, err := e.tc.Get(ctx, e.ns, "user.home_city", alice, time.Time{}); err != nil || string(m.Value) != `"Lives in Porto"` || m.SourceClass != "derived" {
		t.Errorf("user.home_city is %+v, %v", m, err)
	}
	if m, _ := e.tc.Get(ctx, e.ns, "food.favourite", alice, time.Time{}); m == nil || m.Status != "conflicted" {
		t.Errorf("the contradicted memory: %+v, want conflicted", m)
	}
	sent := e.srv.Chats()[0]
	if !sent.Strict || !sent.Contains("- user.home_city: Lives in Lisbon") || !sent.Contains("[3] user: Actually my favourite food is pizza.") {
		t.Errorf("the extraction call: strict %t, %q", sent.Strict, sent.Text())
	}
}

// Every drop and the dedup do what the seeds say, on a transcript built to trigger
// each; a "forget" retires the row it names; a dry run answers the same and writes
// nothing.
func TestFromMessagesDropsDedupsAndForgets(t *testing.T) {
	e := newExtractionEnv(t, nil)
	ctx := context.Background()
	e.set("user.gym", map[string]any{"value": "Goes to the gym on Mondays", "user_id": "alice"})
	e.set("user.drink", map[string]any{"value": "Drinks green tea", "user_id": "alice"})
	e.set("user.editor", map[string]any{"value": "Uses Vim for everything", "user_id": "alice", "session_id": "s1"})
	e.set("user.speaks", map[string]any{"value": "Speaks Portuguese", "user_id": "alice"})
	e.projected()
	answer := extracted([]said{
		{"user.tea", "Drinks green tea", 0},                     // the session was served it
		{"user.editor_choice", "Uses Vim", 1},                   // the session wrote it
		{"assistant.action", "Ran the test suite", 2},           // narration
		{"project.status", "The tests are passing", 2},          // a status snapshot
		{"project.build", "The project builds with make", 3},    // the verifier's
		{"user.languages", "Speaks Portuguese", 3},              // stored under another key
		{"project.language", "The project is written in Go", 3}, // said again below
		{"project.lang_go", "The project is written in Go", 4},
		{"...", "no key at all", 4},
	}, "user.gym")
	// The verifier sees what is left after the text rules: build, languages, language, lang_go.
	verified := llmtest.JSON(map[string]any{"verdicts": []any{map[string]any{"index": 0, "durable": false},
		map[string]any{"index": 1, "durable": true}, map[string]any{"index": 2, "durable": true}, map[string]any{"index": 3, "durable": true}}})
	e.srv.ReplyWhen(isExtraction, answer, answer)
	e.srv.ReplyWhen(isVerification, verified, verified)
	req := client.FromMessagesRequest{Identity: client.Identity{UserID: "alice", SessionID: "s1"}, SessionKind: "coding",
		RecalledKeys: []string{"user.drink"}, DryRun: true,
		Messages: messages("I drink green tea.", "I use Vim.", "Forget about my gym.", "assistant: Ran the tests, all green.", "We write it in Go.")}
	check := func(a *client.FromMessagesAnswer, dry bool) {
		t.Helper()
		got := byKey(a)
		for key, step := range map[string]string{"user.tea": "loom.drop_recall_echoes", "user.editor_choice": "loom.drop_session_echoes",
			"assistant.action": "loom.drop_activity_narration", "project.status": "loom.drop_non_durable",
			"project.build": "loom.verify_durable", "user.languages": "loom.hash_dedup", "project.language": "loom.hash_dedup",
			"...": "loom.llm_extract"} {
			if got[key].DroppedBy != step {
				t.Errorf("dry run %t: %s: %+v, want dropped by %s", dry, key, got[key], step)
			}
		}
		if f := got["project.lang_go"]; f.Verdict != "new" || f.DroppedBy != "" {
			t.Errorf("dry run %t: project.lang_go %+v, want written", dry, f)
		}
		if len(a.Forgotten) != 1 || a.Forgotten[0].Key != "user.gym" || a.Forgotten[0].Retired == dry || a.Forgotten[0].MemoryID == "" {
			t.Errorf("dry run %t: forgotten %+v", dry, a.Forgotten)
		}
		if a.ModelCalls != 2 {
			t.Errorf("dry run %t: %d model calls, want the extraction and the verifier", dry, a.ModelCalls)
		}
	}
	a, err := e.tc.FromMessages(ctx, e.ns, req)
	if err != nil {
		t.Fatal(err)
	}
	check(a, true)
	if _, err := e.tc.Get(ctx, e.ns, "project.lang_go", client.Identity{UserID: "alice", SessionID: "s1"}, time.Time{}); !client.IsCode(err, client.CodeNotFound) {
		t.Fatalf("the dry run wrote project.lang_go: %v", err)
	}
	if _, err := e.tc.Get(ctx, e.ns, "user.gym", client.Identity{UserID: "alice"}, time.Time{}); err != nil {
		t.Fatalf("the dry run retired user.gym: %v", err)
	}
	req.DryRun = false
	if a, err = e.tc.FromMessages(ctx, e.ns, req); err != nil {
		t.Fatal(err)
	}
	check(a, false)
	if _, err := e.tc.Get(ctx, e.ns, "user.gym", client.Identity{UserID: "alice"}, time.Time{}); !client.IsCode(err, client.CodeNotFound) {
		t.Fatalf("user.gym after the forget: %v", err)
	}
	// A step skipped is not run; the extraction cannot be skipped.
	e.srv.ReplyWhen(isExtraction, answer)
	req.SessionID, req.Skip = "s2", []string{"loom.verify_durable", "loom.bulk_write"}
	if a, err = e.tc.FromMessages(ctx, e.ns, req); err != nil || byKey(a)["project.build"].Verdict != "not_written" || a.ModelCalls != 1 {
		t.Fatalf("skipping the verifier and the write: %+v, %v", a, err)
	}
	req.Skip = []string{"loom.llm_extract"}
	if _, err := e.tc.FromMessages(ctx, e.ns, req); !isStatus(err, http.StatusUnprocessableEntity) {
		t.Fatalf("skipping the extraction: %v", err)
	}
}

// Without a provider every route that calls a model answers the 503, and its message
// says which settings to set.
func TestModelRoutesWithoutAProvider(t *testing.T) {
	n, url := env.API(t, func(c *config.Config) { c.LLM.BaseURL, c.LLM.Model = "", "" })
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: testenv.Unique(t, "org")}))
	for _, call := range []struct{ path, body string }{
		{"/v1/namespaces/x/memories:fromMessages", `{"messages":[{"role":"user","content":"I live in Rome"}]}`},
		{"/v1/namespaces/x/memories:ask", `{"query":"where do I live?"}`},
		{"/v1/namespaces/x/knowledge:synthesize", `{"query":"where do I live?"}`},
	} {
		r := c.Do(t, http.MethodPost, call.path, []byte(call.body))
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		_ = json.Unmarshal(r.Body, &e)
		if r.Status != http.StatusServiceUnavailable || r.ErrorCode() != "LLM_NOT_CONFIGURED" || !strings.Contains(e.Error.Message, "LOOM_LLM_BASE_URL") {
			t.Errorf("%s: %d %s", call.path, r.Status, r.Body)
		}
	}
}

// clock is a settable clock for the provider's day.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// A namespace's daily cost cap refuses extraction once reached, and the next day
// (UTC, on the provider's clock) it answers again.
func TestCostCapRefusesAndResetsTheNextDay(t *testing.T) {
	clk := &clock{now: time.Date(2031, 5, 4, 22, 0, 0, 0, time.UTC)}
	e := newExtractionEnv(t, nil, app.WithModelClock(clk.Now))
	ctx := context.Background()
	negative := -1.0
	if _, err := e.tc.Configure(ctx, e.ns, client.NamespaceConfig{DailyCostCapUSD: &negative}); !isStatus(err, http.StatusUnprocessableEntity) {
		t.Fatalf("a negative cap: %v", err)
	}
	capUSD := 0.001
	if _, err := e.tc.Configure(ctx, e.ns, client.NamespaceConfig{DailyCostCapUSD: &capUSD}); err != nil {
		t.Fatal(err)
	}
	// 1000 tokens in and 500 out at the default price (2.5/10 per million): $0.0075.
	e.srv.Script(func(llmtest.ChatRequest) llmtest.Reply {
		return extracted([]said{{"user.city", "Lives in Rome", 0}}).WithUsage(1000, 500)
	})
	req := client.FromMessagesRequest{Messages: messages("I live in Rome.")}
	if _, err := e.tc.FromMessages(ctx, e.ns, req); err != nil {
		t.Fatal(err)
	}
	_, err := e.tc.FromMessages(ctx, e.ns, req)
	if ce, ok := client.AsError(err); !ok || ce.Status != http.StatusTooManyRequests || ce.Code != "DAILY_COST_CAP_REACHED" {
		t.Fatalf("past the cap: %v", err)
	}
	if n := len(e.srv.Chats()); n != 1 {
		t.Fatalf("%d calls sent, want none past the cap", n)
	}
	clk.Add(3 * time.Hour) // 01:00 the next day
	if _, err := e.tc.FromMessages(ctx, e.ns, req); err != nil {
		t.Fatalf("the next day: %v", err)
	}
}

// mem0's add with infer (its default) runs memory.set_from_messages: each fact comes
// back as mem0's ADD, and a later statement of the same attribute as UPDATE of it.
func TestMem0AddInfersFacts(t *testing.T) {
	e := newExtractionEnv(t, nil)
	e.srv.ReplyWhen(func(r llmtest.ChatRequest) bool { return isExtraction(r) && r.Contains("Lisbon") },
		extracted([]said{{"user.home_city", "Lives in Lisbon", 0}, {"user.pet", "Has a cat called Miso", 1}}))
	e.srv.ReplyWhen(func(r llmtest.ChatRequest) bool { return isExtraction(r) && r.Contains("Porto") },
		extracted([]said{{"user.home_city", "Lives in Porto", 0}}))
	type result struct{ ID, Event, Memory string }
	add := func(texts ...string) []result {
		t.Helper()
		msgs := []map[string]string{}
		for _, s := range texts {
			msgs = append(msgs, map[string]string{"role": "user", "content": s})
		}
		body, _ := json.Marshal(map[string]any{"messages": msgs, "user_id": "alice", "app_id": e.ns})
		r := e.c.Do(t, http.MethodPost, "/mem0/v3/memories/add/", body)
		var a struct{ Results []result }
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &a) != nil {
			t.Fatalf("add: %d %s", r.Status, r.Body)
		}
		return a.Results
	}
	first := add("I live in Lisbon.", "I have a cat called Miso.")
	if len(first) != 2 || first[0].Event != "ADD" || first[0].Memory != "Lives in Lisbon" || first[0].ID == "" || first[1].Memory != "Has a cat called Miso" {
		t.Fatalf("the first add: %+v", first)
	}
	if moved := add("I moved to Porto."); len(moved) != 1 || moved[0].Event != "UPDATE" || moved[0].Memory != "Lives in Porto" || moved[0].ID != first[0].ID {
		t.Fatalf("the second add: %+v", moved)
	}
	if m, err := e.tc.Get(context.Background(), e.ns, "user.home_city", client.Identity{UserID: "alice"}, time.Time{}); err != nil || string(m.Value) != `"Lives in Porto"` {
		t.Fatalf("user.home_city: %+v, %v", m, err)
	}
}
