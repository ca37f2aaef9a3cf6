package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomplane/loom/adapters/mcp"
	"github.com/loomplane/loom/client"
)

const memoryJSON = `{"memory_id":"0b8e6f3c-4c1e-4d52-9a7e-2f0f3a1f5e11","namespace":"support","memory_key":"drink","agent":"-","user_id":"alice","session_id":"-",
 "version":1773480413589793238,"version_text":"1773480413589793238","seq":42,"memory_type":"fact","status":"active","value":"the user prefers tea",
 "content_sha256":"9f86","tags":[],"confidence":1,"reinforcement_count":0,"actor":"token:3f2a","source_class":"direct","pinned":false,"locked":false,
 "sensitivity":"normal","created_at":"2026-03-14T09:26:53.589793238Z","updated_at":"2026-03-14T09:26:53.589793238Z"`

// fakeLoom answers the REST routes the tools call with the spec's examples.
func fakeLoom(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer loom_t_s" {
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"code":"UNAUTHENTICATED","message":"unknown or revoked token","retryable":false}}`)
			return
		}
		switch {
		case r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/memories/pinned"):
			w.WriteHeader(409)
			io.WriteString(w, `{"error":{"code":"PINNED_CONFLICT","message":"the key holds a pinned value; write with pin=true to replace it","retryable":false}}`)
		case r.Method == http.MethodPut:
			io.WriteString(w, `{"memory_id":"0b8e6f3c-4c1e-4d52-9a7e-2f0f3a1f5e11","namespace":"support","memory_key":"drink","agent":"-","user_id":"alice","session_id":"-",
			 "version":1773480413589793238,"version_text":"1773480413589793238","seq":42,"content_sha256":"9f86","reinforcement_count":0,"event":"memory.written",
			 "written":true,"verdict":"new","status":"active","memory_type":"fact","sensitivity":"normal","pinned":false,"peers":[]}`)
		case strings.HasSuffix(r.URL.Path, "memories:fromMessages"):
			io.WriteString(w, `{"namespace":"support","agent":"-","user_id":"alice","session_id":"-","facts":[
			 {"key":"user.home_city","value":"Lives in Lisbon","message_index":0,"verdict":"new","memory_id":"0b8e6f3c-4c1e-4d52-9a7e-2f0f3a1f5e11"},
			 {"key":"user.mood","value":"Is tired today","message_index":1,"verdict":"dropped","dropped_by":"loom.drop_non_durable"}],
			 "forgotten":[],"superseded":[],"steps":[],"model_calls":1,"model_ms":3,"usage":{"prompt_tokens":10,"completion_tokens":5,"cost_usd":0}}`)
		case strings.HasSuffix(r.URL.Path, "memories:search"):
			io.WriteString(w, `{"hits":[`+memoryJSON+`,"score":0.61,"scores":{"vector":0.71,"lexical":2.1,"lexical_coverage":0.75,"key":0,"prior":0.0099,"fused":0.6,"relevance":0.75}}],
			 "verdict":"ok","stale_dropped":0,"mode":"weighted","namespaces":["support"],"barrier":{"generations":null,"waited_ms":3}}`)
		case strings.HasSuffix(r.URL.Path, "memories:ask"):
			io.WriteString(w, `{"answer":"the user prefers tea","abstained":false,"citations":[{"memory_id":"0b8e6f3c-4c1e-4d52-9a7e-2f0f3a1f5e11",
			 "namespace":"support","memory_key":"drink"}],"citations_dropped":1,"stale_dropped":0,"model":"m",
			 "search":{"hits":[],"verdict":"ok","stale_dropped":0,"mode":"weighted","namespaces":["support"],"barrier":{"generations":null,"waited_ms":3}}}`)
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/memories/drink"):
			io.WriteString(w, memoryJSON+"}")
		default:
			w.WriteHeader(404)
			io.WriteString(w, `{"error":{"code":"RESOURCE_NOT_FOUND","message":"memory not found","retryable":false}}`)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func connect(t *testing.T, token string) *sdk.ClientSession {
	t.Helper()
	c, err := client.New(fakeLoom(t).URL, token)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := sdk.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := mcp.NewServer(c, mcp.Implementation{Version: "test"}, nil).Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func text(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func TestToolsAreListedWithSchemas(t *testing.T) {
	cs := connect(t, "loom_t_s")
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*sdk.Tool{}
	for _, tl := range res.Tools {
		got[tl.Name] = tl
	}
	for _, name := range []string{"memory_set", "memory_search", "memory_ask", "memory_get", "memory_list", "memory_history", "memory_delete", "memory_from_messages", "memory_profile", "profile_structured", "memory_context", "memory_timeline", "memory_log_turns", "memory_recall", "profile_schema_set", "memory_consolidate", "memory_consolidate_undo"} {
		tl := got[name]
		if tl == nil || tl.Description == "" || tl.InputSchema == nil || tl.OutputSchema == nil {
			t.Fatalf("tool %s: %+v", name, tl)
		}
	}
	in, _ := json.Marshal(got["memory_set"].InputSchema)
	for _, want := range []string{`"namespace"`, `"key"`, `"value"`, `"required":["namespace","key","value"]`} {
		if !strings.Contains(string(in), want) {
			t.Errorf("memory_set input schema %s lacks %s", in, want)
		}
	}
}

func TestToolAnswersAreStructuredWithASummary(t *testing.T) {
	cs := connect(t, "loom_t_s")
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "memory_set", Arguments: map[string]any{
		"namespace": "support", "key": "drink", "value": "the user prefers tea", "user_id": "alice"}})
	if err != nil || res.IsError {
		t.Fatalf("memory_set: %v %s", err, text(res))
	}
	var set client.SetAnswer
	remarshal(t, res.StructuredContent, &set)
	if !set.Written || set.Verdict != "new" || set.VersionText != "1773480413589793238" {
		t.Errorf("structured content %+v", set)
	}
	if !strings.Contains(text(res), "verdict new") {
		t.Errorf("summary %q", text(res))
	}

	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "memory_search", Arguments: map[string]any{"namespace": "support", "query": "what does the user drink"}})
	if err != nil || res.IsError {
		t.Fatalf("memory_search: %v %s", err, text(res))
	}
	var sa client.SearchAnswer
	remarshal(t, res.StructuredContent, &sa)
	if sa.Verdict != "ok" || len(sa.Hits) != 1 || sa.Hits[0].Scores.Relevance != 0.75 || string(sa.Hits[0].Value) != `"the user prefers tea"` {
		t.Errorf("structured content %+v", sa)
	}
}

func TestAskAnswersWithItsCitations(t *testing.T) {
	cs := connect(t, "loom_t_s")
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "memory_ask", Arguments: map[string]any{
		"namespace": "support", "query": "what does the user drink"}})
	if err != nil || res.IsError {
		t.Fatalf("memory_ask: %v %s", err, text(res))
	}
	var a client.AskAnswer
	remarshal(t, res.StructuredContent, &a)
	if a.Answer != "the user prefers tea" || len(a.Citations) != 1 || a.CitationsDropped != 1 {
		t.Errorf("structured content %+v", a)
	}
	if !strings.Contains(text(res), "the user prefers tea") || !strings.Contains(text(res), "(from drink)") {
		t.Errorf("summary %q", text(res))
	}
}

func TestMemoryFromMessagesListsEveryFact(t *testing.T) {
	cs := connect(t, "loom_t_s")
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "memory_from_messages", Arguments: map[string]any{
		"namespace": "support", "user_id": "alice", "messages": []any{
			map[string]any{"role": "user", "content": "I live in Lisbon."}, map[string]any{"role": "user", "content": "I am tired today."}}}})
	if err != nil || res.IsError {
		t.Fatalf("memory_from_messages: %v %s", err, text(res))
	}
	var a client.FromMessagesAnswer
	remarshal(t, res.StructuredContent, &a)
	if len(a.Facts) != 2 || a.Facts[0].Verdict != "new" {
		t.Errorf("structured content %+v", a)
	}
	for _, want := range []string{"user.home_city = Lives in Lisbon: new (message 0)", "dropped by loom.drop_non_durable"} {
		if !strings.Contains(text(res), want) {
			t.Errorf("summary %q lacks %q", text(res), want)
		}
	}
	res, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "memory_from_messages", Arguments: map[string]any{
		"namespace": "support", "messages": []any{map[string]any{"role": "user", "content": "hi", "at": "yesterday"}}}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "messages[0].at") {
		t.Errorf("a bad time: %v %s", err, text(res))
	}
}

func TestRefusalsAreToolErrorsWithTheLoomCode(t *testing.T) {
	cs := connect(t, "loom_t_s")
	ctx := context.Background()
	for _, tc := range []struct {
		call *sdk.CallToolParams
		code string
	}{
		{&sdk.CallToolParams{Name: "memory_set", Arguments: map[string]any{"namespace": "support", "key": "pinned", "value": "x"}}, "PINNED_CONFLICT"},
		{&sdk.CallToolParams{Name: "memory_get", Arguments: map[string]any{"namespace": "support", "key": "nothing"}}, "RESOURCE_NOT_FOUND"},
		{&sdk.CallToolParams{Name: "memory_get", Arguments: map[string]any{"namespace": "support", "key": "drink", "as_of": "yesterday"}}, "VALIDATION_FAILED"},
	} {
		res, err := cs.CallTool(ctx, tc.call)
		if err != nil {
			t.Fatalf("%s: a protocol error %v, want a tool error", tc.call.Name, err)
		}
		if !res.IsError || !strings.Contains(text(res), tc.code) || res.StructuredContent != nil {
			t.Errorf("%s: IsError %v, structured %v, text %q: want a tool error naming %s", tc.call.Name, res.IsError, res.StructuredContent, text(res), tc.code)
		}
	}
	// A bad token is Loom's refusal too.
	res, err := connect(t, "loom_bad_token").CallTool(ctx, &sdk.CallToolParams{Name: "memory_list", Arguments: map[string]any{"namespace": "support"}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "UNAUTHENTICATED") {
		t.Errorf("bad token: %v %s", err, text(res))
	}
}

func TestMemoriesAreResources(t *testing.T) {
	cs := connect(t, "loom_t_s")
	ctx := context.Background()
	tpl, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(tpl.ResourceTemplates) != 1 || tpl.ResourceTemplates[0].URITemplate != "loom://{namespace}/{key}" {
		t.Fatalf("templates: %v %+v", err, tpl)
	}
	res, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "loom://support/drink"})
	if err != nil {
		t.Fatal(err)
	}
	var m client.Memory
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &m); err != nil || m.MemoryKey != "drink" {
		t.Errorf("contents %s: %v", res.Contents[0].Text, err)
	}
	if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "loom://support/nothing"}); err == nil {
		t.Error("reading a missing memory succeeded")
	}
}

func TestHTTPHandlerWantsABearerToken(t *testing.T) {
	loom, err := client.New("http://127.0.0.1:1", "")
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(mcp.NewHTTPHandler(mcp.HTTPOptions{Loom: loom}))
	defer s.Close()
	resp, err := http.Post(s.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(string(b), "UNAUTHENTICATED") {
		t.Errorf("no token: %d %s", resp.StatusCode, b)
	}
}

func remarshal(t *testing.T, from, to any) {
	t.Helper()
	b, err := json.Marshal(from)
	if err == nil {
		err = json.Unmarshal(b, to)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// Every property schema is an object (a client's schema reader refuses the boolean
// schema `true`, which an empty schema marshals to).
func TestSchemasHaveNoBooleanProperties(t *testing.T) {
	res, err := connect(t, "loom_t_s").ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		for _, s := range []any{tl.InputSchema, tl.OutputSchema} {
			b, _ := json.Marshal(s)
			if strings.Contains(string(b), `:true`) && strings.Contains(string(b), `"properties"`) {
				var walk func(any, string)
				walk = func(v any, path string) {
					m, ok := v.(map[string]any)
					if !ok {
						return
					}
					if props, ok := m["properties"].(map[string]any); ok {
						for k, p := range props {
							if _, isBool := p.(bool); isBool {
								t.Errorf("%s: %s%s is a boolean schema", tl.Name, path, k)
							}
							walk(p, path+k+".")
						}
					}
					walk(m["items"], path+"[].")
				}
				var parsed any
				json.Unmarshal(b, &parsed)
				walk(parsed, "")
			}
		}
	}
}
