package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// A rule about the agent itself (about="agent") is filed to the learnings queue with
// the user's quote, sealed at rest, and is never a memory; the user's fact of the same
// conversation is. A token bound to another user sees none of it; an erasure of the
// namespace removes it.
func TestAgentRulesAreLearningsNotMemories(t *testing.T) {
	ctx := context.Background()
	srv := llmtest.New(t)
	n, url := env.API(t, func(c *config.Config) {
		withProvider(srv)(c)
		c.Command.Extraction.QueueEnabled = false
	})
	org, ns := testenv.Unique(t, "org"), testenv.Unique(t, "learn")
	admin := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	tc := admin.Typed(t)
	const rule, quote = "Answer in French", "From now on, always answer me in French please."
	learned := learningsRuleIsNoMemory(t, ctx, srv, tc, ns, rule, quote)
	learningsQueueHoldsTheRule(t, ctx, tc, ns, learned, rule, quote)
	learningsOverMCP(t, n, url, org, ns, rule, quote)
	learningsInTheExport(t, ctx, tc, ns, learned, rule, quote)
	// Sealed at rest: neither text is in the clear in its row.
	pool := env.PG(t)
	learningsSealedAtRest(t, pool, org, ns)
	learningsBoundTokensSeeTheirUsers(t, ctx, n, url, org, ns)
	learningsRefuseBadInputAndReaders(t, n, url, admin, org, ns)
	payload := learningsSnapshotRestoresThem(t, ctx, tc, org, ns, learned, rule, quote)
	learningsErasureRemovesThem(t, ctx, srv, admin, tc, pool, org, ns)
	// The snapshot taken before alice's erasure restores none of her learnings now.
	again := must[*client.RestoreAnswer](t, "restore after the erasure")(tc.RestoreNamespace(ctx, testenv.Unique(t, "learn-after"), payload))
	if again.Counts.Learnings != 0 {
		t.Errorf("a restore after alice's erasure filed %d learnings, want none", again.Counts.Learnings)
	}
}

// learningsSnapshotRestoresThem takes the namespace's snapshot: it carries the rule
// as a learning line with alice's quote; a restore into its source files nothing
// twice, and one into a fresh namespace files it again (same id, rule, supporter,
// quote and time, sealed at rest). It returns the payload.
func learningsSnapshotRestoresThem(t *testing.T, ctx context.Context, tc *client.Client, org, ns string, learned client.ExtractedFact, rule, quote string) []byte {
	payload := readAll(t, must[*client.Stream](t, "snapshot")(tc.SnapshotNamespace(ctx, ns)))
	var lines []client.ExportLearning
	err := client.ReadLines(bytes.NewReader(payload), func(kind string, line json.RawMessage) error {
		if kind != "learning" {
			return nil
		}
		var l client.ExportLearning
		err := json.Unmarshal(line, &l)
		lines = append(lines, l)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || lines[0].CandidateID != learned.LearningID || lines[0].Rule != rule || len(lines[0].Supporters) != 1 ||
		lines[0].Supporters[0].Quote != quote {
		t.Fatalf("the snapshot's learning lines: %+v, want the rule with alice's quote", lines)
	}
	// Into its source, which holds the rule already: nothing is filed twice.
	if ans := must[*client.RestoreAnswer](t, "restore into the source")(tc.RestoreNamespace(ctx, ns, payload)); ans.Counts.Learnings != 0 {
		t.Errorf("a restore into the source filed %d learnings, want none", ans.Counts.Learnings)
	}
	if ls, err := tc.Learnings(ctx, ns, client.LearningsOptions{}); err != nil || len(ls.Learnings) != 1 || len(ls.Learnings[0].Supporters) != 1 {
		t.Errorf("the source's learnings after a restore into it: %+v, %v; want the one rule, once", ls, err)
	}
	dst := testenv.Unique(t, "learn-restored")
	if ans := must[*client.RestoreAnswer](t, "restore")(tc.RestoreNamespace(ctx, dst, payload)); ans.Counts.Learnings != 1 {
		t.Errorf("a restore into a fresh namespace filed %d learnings, want 1", ans.Counts.Learnings)
	}
	ls, err := tc.Learnings(ctx, dst, client.LearningsOptions{})
	if err != nil || len(ls.Learnings) != 1 {
		t.Fatalf("the restored namespace's learnings: %+v, %v; want the rule", ls, err)
	}
	l := ls.Learnings[0]
	if l.CandidateID != learned.LearningID || l.Rule != rule || l.Status != "pending" || len(l.Supporters) != 1 ||
		l.Supporters[0].UserID != "alice" || l.Supporters[0].MessageIndex != 2 || l.Supporters[0].Quote != quote ||
		!l.CreatedAt.Equal(lines[0].CreatedAt) {
		t.Errorf("the restored learning: %+v, want the snapshot's %+v", l, lines[0])
	}
	learningsSealedAtRest(t, env.PG(t), org, dst)
	return payload
}

// learningsRuleIsNoMemory extracts a conversation holding a user's fact and a rule
// about the agent: the fact is a memory, the rule a learning that no get or search
// serves. It returns the rule's extracted fact for the queue's check.
func learningsRuleIsNoMemory(t *testing.T, ctx context.Context, srv *llmtest.Server, tc *client.Client, ns, rule, quote string) client.ExtractedFact {
	srv.ReplyWhen(saying("vegetarian"), llmtest.JSON(map[string]any{"forget": []any{}, "facts": []any{
		map[string]any{"key": "user.diet", "value": "Is vegetarian", "message_index": 0, "tags": []any{}, "about": "user"},
		map[string]any{"key": "assistant.reply_language", "value": rule, "message_index": 2, "tags": []any{}, "about": "agent"},
	}}))
	alice := client.Identity{UserID: "alice"}
	a, err := tc.FromMessages(ctx, ns, client.FromMessagesRequest{Identity: alice,
		Messages: messages("I am vegetarian.", "assistant: Noted!", quote)})
	if err != nil {
		t.Fatal(err)
	}
	got := byKey(a)
	if f := got["user.diet"]; f.Verdict != "new" || f.MemoryID == "" || f.About != "" {
		t.Errorf("the user's fact: %+v, want a new memory", f)
	}
	learned := got["assistant.reply_language"]
	if learned.Verdict != "learning" || learned.About != "agent" || learned.LearningID == "" || learned.MemoryID != "" {
		t.Errorf("the rule about the agent: %+v, want filed as a learning", learned)
	}
	if _, err := tc.Get(ctx, ns, "assistant.reply_language", alice, time.Time{}); err == nil {
		t.Error("the rule about the agent is readable as a memory")
	}
	if m, err := tc.Get(ctx, ns, "user.diet", alice, time.Time{}); err != nil || string(m.Value) != `"Is vegetarian"` {
		t.Errorf("the user's fact: %+v, %v", m, err)
	}
	for q, want := range map[string]bool{"answer in French": false, "vegetarian": true} {
		s, err := tc.Search(ctx, ns, client.SearchRequest{Query: q, UserID: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, h := range s.Hits {
			keys = append(keys, h.MemoryKey)
			if h.MemoryKey == "assistant.reply_language" {
				t.Errorf("search %q found the rule about the agent as a memory", q)
			}
		}
		if want && (len(keys) == 0 || keys[0] != "user.diet") {
			t.Errorf("search %q: %v, want user.diet", q, keys)
		}
	}
	return learned
}

// learningsQueueHoldsTheRule lists the namespace's learnings: the one rule, pending,
// supported by alice's quote.
func learningsQueueHoldsTheRule(t *testing.T, ctx context.Context, tc *client.Client, ns string, learned client.ExtractedFact, rule, quote string) {
	ls, err := tc.Learnings(ctx, ns, client.LearningsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ls.Learnings) != 1 {
		t.Fatalf("learnings %+v, want the one rule", ls.Learnings)
	}
	l := ls.Learnings[0]
	if l.CandidateID != learned.LearningID || l.Rule != rule || l.Status != "pending" || l.Agent != "-" || len(l.Supporters) != 1 {
		t.Errorf("the learning: %+v", l)
	}
	if s := l.Supporters[0]; s.UserID != "alice" || s.MessageIndex != 2 || s.Quote != quote {
		t.Errorf("its supporter: %+v, want alice's message 2", s)
	}
}

// learningsOverMCP lists the learnings through the MCP tool memory_learnings with the
// go-sdk's client: the admin's answer holds the rule and its quote, structured and
// summarised; a token bound to bob lists none, a reader's is refused as REST refuses it.
func learningsOverMCP(t *testing.T, n *app.Process, url, org, ns, rule, quote string) {
	session := func(tok auth.NewToken) *sdk.ClientSession {
		return goSDKSession(t, &sdk.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: bearer{env.Token(t, n, tok)}}})
	}
	res := callTool(t, session(auth.NewToken{Org: org}), "memory_learnings", map[string]any{"namespace": ns})
	var ls client.LearningsAnswer
	remarshal(t, res.StructuredContent, &ls)
	if res.IsError || len(ls.Learnings) != 1 || ls.Learnings[0].Rule != rule || len(ls.Learnings[0].Supporters) != 1 ||
		ls.Learnings[0].Supporters[0].Quote != quote || !strings.Contains(resultText(res), rule) {
		t.Errorf("memory_learnings: %s %+v", resultText(res), ls)
	}
	res = callTool(t, session(auth.NewToken{Org: org, Role: auth.RoleWriter, ReadUserID: "bob"}), "memory_learnings", map[string]any{"namespace": ns})
	remarshal(t, res.StructuredContent, &ls)
	if res.IsError || len(ls.Learnings) != 0 {
		t.Errorf("memory_learnings with a token bound to bob: %s %+v", resultText(res), ls)
	}
	res = callTool(t, session(auth.NewToken{Org: org, Role: auth.RoleReader}), "memory_learnings", map[string]any{"namespace": ns})
	if !res.IsError || !strings.Contains(resultText(res), "PERMISSION_DENIED") {
		t.Errorf("memory_learnings with a reader's token: %s", resultText(res))
	}
}

// learningsInTheExport reads alice's and bob's subject-access exports: alice's holds
// the rule she supports, with her quote, counted in the end line's records; bob's none.
func learningsInTheExport(t *testing.T, ctx context.Context, tc *client.Client, ns string, learned client.ExtractedFact, rule, quote string) {
	for user, want := range map[string]int{"alice": 1, "bob": 0} {
		var got []client.ExportLearning
		var end client.End
		records := 0
		payload := readAll(t, must[*client.Stream](t, "export")(tc.Export(ctx, user)))
		err := client.ReadLines(bytes.NewReader(payload), func(kind string, line json.RawMessage) error {
			switch kind {
			case "turn", "digest":
				records++
			case "learning":
				var x client.ExportLearning
				err := json.Unmarshal(line, &x)
				got = append(got, x)
				return err
			case "end":
				return json.Unmarshal(line, &end)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != want || end.Records != int64(records+len(got)) {
			t.Fatalf("%s's export: learnings %+v, %d other records, end %+v; want %d learnings", user, got, records, end, want)
		}
		if want == 1 {
			l := got[0]
			if l.Namespace != ns || l.CandidateID != learned.LearningID || l.Rule != rule || len(l.Supporters) != 1 ||
				l.Supporters[0].UserID != "alice" || l.Supporters[0].Quote != quote {
				t.Errorf("alice's exported learning: %+v", l)
			}
		}
	}
}

// learningsSealedAtRest checks the queue's and the supporters' rows hold neither the
// rule's nor the quote's text in the clear.
func learningsSealedAtRest(t *testing.T, pool *pgxpool.Pool, org, ns string) {
	if left := testenv.Int(t, pool, `SELECT (SELECT count(*) FROM loom.learnings_queue q WHERE q.org = $1 AND q.namespace = $2 AND position(convert_to($3, 'UTF8') IN q.sealed) > 0)
		+ (SELECT count(*) FROM loom.learnings_supporters s WHERE s.org = $1 AND s.namespace = $2 AND position(convert_to($4, 'UTF8') IN s.sealed) > 0)`,
		org, ns, "French", "French"); left != 0 {
		t.Errorf("%d learnings rows hold their text in the clear", left)
	}
}

// learningsBoundTokensSeeTheirUsers lists the learnings with tokens bound to alice
// and to bob: each sees only the rules its user supports.
func learningsBoundTokensSeeTheirUsers(t *testing.T, ctx context.Context, n *app.Process, url, org, ns string) {
	// A token bound to one user sees only what that user supports.
	for user, want := range map[string]int{"alice": 1, "bob": 0} {
		bound := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleWriter, ReadUserID: user})).Typed(t)
		ls, err := bound.Learnings(ctx, ns, client.LearningsOptions{})
		if err != nil || len(ls.Learnings) != want {
			t.Errorf("%s's token lists %+v (%v), want %d", user, ls, err, want)
		}
	}
}

// learningsRefuseBadInputAndReaders checks a bad limit is a 422 naming it and a
// reader's token is refused the list.
func learningsRefuseBadInputAndReaders(t *testing.T, n *app.Process, url string, admin *testenv.Client, org, ns string) {
	// Bad input and a reader's token are refused.
	reader := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleReader}))
	for _, c := range []struct {
		c      *testenv.Client
		path   string
		status int
		says   string
	}{
		{admin, "/learnings?limit=0", http.StatusUnprocessableEntity, `"limit"`},
		{admin, "/learnings?limit=501", http.StatusUnprocessableEntity, `"limit"`},
		{reader, "/learnings", http.StatusForbidden, "PERMISSION_DENIED"},
	} {
		if r := c.c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+c.path, nil); r.Status != c.status || !strings.Contains(string(r.Body), c.says) {
			t.Errorf("GET %s: %d %s, want %d naming %s", c.path, r.Status, r.Body, c.status, c.says)
		}
	}
}

// learningsErasureRemovesThem files a rule of bob's, then erases alice (her rule
// goes, bob's stays) and the namespace (every learnings row goes).
func learningsErasureRemovesThem(t *testing.T, ctx context.Context, srv *llmtest.Server, admin *testenv.Client, tc *client.Client, pool *pgxpool.Pool, org, ns string) {
	// bob says a rule of his own, in the words of a memory of his (the hash dedup merges
	// a fact into the memory holding its value, never a rule); an erasure of alice takes
	// her supporter and the rule it alone supported, and leaves bob's.
	if r := admin.Put(t, ns, "note", map[string]any{"value": "Use metric units", "user_id": "bob"}); r.Status != http.StatusOK {
		t.Fatalf("bob's note: %d %s", r.Status, r.Body)
	}
	srv.ReplyWhen(saying("metric"), llmtest.JSON(map[string]any{"forget": []any{}, "facts": []any{
		map[string]any{"key": "assistant.units", "value": "Use metric units", "message_index": 0, "tags": []any{}, "about": "agent"},
	}}))
	if _, err := tc.FromMessages(ctx, ns, client.FromMessagesRequest{Identity: client.Identity{UserID: "bob"},
		Messages: messages("Please use metric units with me.")}); err != nil {
		t.Fatal(err)
	}
	view := admin.Erase(t, map[string]any{"namespace": ns, "user_id": "alice"})
	census, _ := view["census"].(map[string]any)
	for _, k := range []string{"pg:loom.learnings_queue", "pg:loom.learnings_supporters"} {
		if v, ok := census[k]; !ok || v != float64(0) {
			t.Errorf("the erasure's census of %s: %v (present %t)", k, v, ok)
		}
	}
	if ls, err := tc.Learnings(ctx, ns, client.LearningsOptions{}); err != nil || len(ls.Learnings) != 1 || ls.Learnings[0].Rule != "Use metric units" {
		t.Errorf("after alice's erasure: %+v, %v; want bob's rule alone", ls, err)
	}
	admin.Erase(t, map[string]any{"namespace": ns})
	if ls, err := tc.Learnings(ctx, ns, client.LearningsOptions{}); err != nil || len(ls.Learnings) != 0 {
		t.Errorf("after the namespace's erasure: %+v, %v; want no learnings", ls, err)
	}
	if left := testenv.Int(t, pool, `SELECT (SELECT count(*) FROM loom.learnings_queue WHERE org = $1 AND namespace = $2)
		+ (SELECT count(*) FROM loom.learnings_supporters WHERE org = $1 AND namespace = $2)`, org, ns); left != 0 {
		t.Errorf("%d learnings rows left after the erasure", left)
	}
}

// A deferred extraction whose only fact is a rule about the agent files it, and the
// commit that files it marks the request done.
func TestDeferredExtractionFilesALearning(t *testing.T) {
	q := newQueueEnv(t, nil)
	q.srv.ReplyWhen(saying("bullet points"), llmtest.JSON(map[string]any{"forget": []any{}, "facts": []any{
		map[string]any{"key": "assistant.format", "value": "Answer in bullet points", "message_index": 0, "tags": []any{}, "about": "agent"},
	}}))
	id := q.enqueue("carol", "Always answer me in bullet points.")
	defer q.worker()()
	x := q.await(id, "done")
	var a client.FromMessagesAnswer
	if err := json.Unmarshal(x.Result, &a); err != nil || len(a.Facts) != 1 || a.Facts[0].Verdict != "learning" || a.Facts[0].LearningID == "" {
		t.Fatalf("the done request's answer: %s (%v)", x.Result, err)
	}
	ls, err := q.tc.Learnings(context.Background(), q.ns, client.LearningsOptions{})
	if err != nil || len(ls.Learnings) != 1 || ls.Learnings[0].CandidateID != a.Facts[0].LearningID ||
		ls.Learnings[0].Supporters[0].UserID != "carol" {
		t.Fatalf("learnings %+v, %v; want carol's rule", ls, err)
	}
	if n := q.revisions("assistant.format"); n != 0 {
		t.Errorf("%d revisions of the rule's key, want none", n)
	}
}
