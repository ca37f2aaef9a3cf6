package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

var mcpTools = []string{"decision_record", "knowledge_add", "knowledge_search", "knowledge_synthesize", "memory_ask", "memory_consolidate", "memory_consolidate_undo", "memory_context", "memory_crystallize", "memory_delete", "memory_from_messages", "memory_get", "memory_history", "memory_learnings", "memory_list", "memory_log_turns", "memory_profile", "memory_promote", "memory_recall", "memory_search", "memory_set", "memory_timeline", "memory_touch", "profile_schema_set", "profile_structured"}

// tsRun is what js/mcp_client.mjs printed: each step's answer as the TypeScript SDK
// handed it over.
type tsRun struct {
	Server struct{ Name string }
	Tools  []struct {
		Name            string
		HasOutputSchema bool
		Required        []string
	}
	Set, Search, Get, Delete, GetAfterDelete, BadArgs toolResult
	ProfileSchema, Consolidate, UndoUnknown           toolResult
	ProfileUnbuilt                                    toolResult
	Resource                                          struct {
		Contents []struct{ URI, MimeType, Text string }
	}
	Templates []string
}

type toolResult struct {
	IsError           bool `json:"isError"`
	Content           []struct{ Text string }
	StructuredContent json.RawMessage `json:"structuredContent"`
}

func (r toolResult) text() string {
	var parts []string
	for _, c := range r.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

// The official TypeScript MCP SDK, run by node, drives loomd over both transports:
// the tools are listed with their schemas, and set → search → get → delete, a
// resource read and a refusal answer as a model's client expects.
func TestTypeScriptMCPClient(t *testing.T) {
	n, url := env.SharedAPI(t)
	// An admin's: profile_schema_set and memory_consolidate need one.
	token := env.Token(t, n, auth.NewToken{Org: "acme", Role: auth.RoleAdmin})
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte(token+"\n"), 0o600)
	loomd := testenv.Build(t, "github.com/loomplane/loom/cmd/loomd")
	for _, tr := range []struct{ name, target string }{
		{"http", url + "/mcp"},
		{"stdio", loomd + "|" + url + "|" + tokenFile},
	} {
		t.Run(tr.name, func(t *testing.T) {
			ns := testenv.Unique(t, "mcp-ts")
			// Near-identical memories are each written (for memory_consolidate to find).
			testenv.NewClient(url, token).AppendOnly(t, ns)
			var run tsRun
			if err := json.Unmarshal(runNode(t, "mcp_client.mjs", nil, tr.name, tr.target, token, ns), &run); err != nil {
				t.Fatal(err)
			}
			checkTSRun(t, ns, run)
		})
	}
}

func checkTSRun(t *testing.T, ns string, run tsRun) {
	t.Helper()
	if run.Server.Name != "loomd" {
		t.Errorf("server %q, want loomd", run.Server.Name)
	}
	var names []string
	for _, tl := range run.Tools {
		names = append(names, tl.Name)
		if !tl.HasOutputSchema {
			t.Errorf("tool %s has no output schema", tl.Name)
		}
		if tl.Name == "memory_set" && !slices.Equal(tl.Required, []string{"namespace", "key", "value"}) {
			t.Errorf("memory_set requires %v", tl.Required)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, mcpTools) {
		t.Fatalf("tools %v, want %v", names, mcpTools)
	}

	checkTSUpkeep(t, ns, run)

	var set client.SetAnswer
	structured(t, "memory_set", run.Set, &set)
	if !set.Written || set.Event != "memory.written" || set.Verdict != "new" || set.UserID != "alice" || set.VersionText == "" {
		t.Errorf("memory_set answered %+v", set)
	}
	if !strings.Contains(run.Set.text(), "verdict new") {
		t.Errorf("memory_set summary %q", run.Set.text())
	}

	var found client.SearchAnswer
	structured(t, "memory_search", run.Search, &found)
	if found.Verdict != client.VerdictOK || len(found.Hits) == 0 || found.Hits[0].MemoryKey != "editor-theme" || found.Hits[0].Scores.Relevance <= 0 {
		t.Errorf("memory_search answered %+v", found)
	}

	var got client.Memory
	structured(t, "memory_get", run.Get, &got)
	if got.MemoryID != set.MemoryID || string(got.Value) != `"the user prefers dark mode in the editor"` {
		t.Errorf("memory_get answered %+v", got)
	}

	if len(run.Resource.Contents) != 1 || run.Resource.Contents[0].URI != "loom://"+ns+"/font" ||
		!strings.Contains(run.Resource.Contents[0].Text, `"value":"a monospaced font"`) {
		t.Errorf("resource read %+v", run.Resource)
	}
	if !slices.Equal(run.Templates, []string{"loom://{namespace}/{key}"}) {
		t.Errorf("resource templates %v", run.Templates)
	}

	var del client.CopyAnswer
	structured(t, "memory_delete", run.Delete, &del)
	if !del.Written || !del.Deleted || !del.Tombstone || del.Event != "memory.tombstoned" {
		t.Errorf("memory_delete answered %+v", del)
	}
	for name, r := range map[string]struct {
		res  toolResult
		code string
	}{"memory_get after the delete": {run.GetAfterDelete, "RESOURCE_NOT_FOUND"}, "memory_set without a value": {run.BadArgs, "value"}} {
		if !r.res.IsError || len(r.res.StructuredContent) != 0 || !strings.Contains(r.res.text(), r.code) {
			t.Errorf("%s: isError %v, structured %s, text %q: want a tool error naming %s", name, r.res.IsError, r.res.StructuredContent, r.res.text(), r.code)
		}
	}
}

// checkTSUpkeep: the upkeep tools' answers as the TypeScript SDK handed them over,
// checked against their output schemas.
func checkTSUpkeep(t *testing.T, ns string, run tsRun) {
	t.Helper()
	var ps client.ProfileSchemaAnswer
	structured(t, "profile_schema_set", run.ProfileSchema, &ps)
	if ps.Namespace != ns || ps.SchemaHash == "" {
		t.Errorf("profile_schema_set answered %+v", ps)
	}
	var dry client.ConsolidateAnswer
	structured(t, "memory_consolidate", run.Consolidate, &dry)
	if !dry.DryRun || len(dry.Clusters) != 1 || len(dry.Clusters[0].Members) != 3 || dry.ModelCalls != 0 {
		t.Errorf("memory_consolidate's dry run answered %+v; want the three coffee memories in one cluster", dry)
	}
	if !run.UndoUnknown.IsError || !strings.Contains(run.UndoUnknown.text(), "RESOURCE_NOT_FOUND") {
		t.Errorf("memory_consolidate_undo of an unknown run: %q; want RESOURCE_NOT_FOUND", run.UndoUnknown.text())
	}
	// No workers run here: bo's profile is not built, and the tool says so as REST does.
	if !run.ProfileUnbuilt.IsError || !strings.Contains(run.ProfileUnbuilt.text(), "RESOURCE_NOT_FOUND") {
		t.Errorf("profile_structured of a user without a profile: %q; want RESOURCE_NOT_FOUND", run.ProfileUnbuilt.text())
	}
}

func structured(t *testing.T, tool string, r toolResult, into any) {
	t.Helper()
	if r.IsError {
		t.Fatalf("%s answered an error: %s", tool, r.text())
	}
	if err := json.Unmarshal(r.StructuredContent, into); err != nil {
		t.Fatalf("%s structured content %s: %v", tool, r.StructuredContent, err)
	}
}

// bearer adds a token to every request of the go-sdk's HTTP transport.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func goSDKSession(t *testing.T, tr sdk.Transport) *sdk.ClientSession {
	t.Helper()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "loom-e2e-go"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callTool(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	return res
}

func resultText(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// The go-sdk's own client over both transports; the HTTP transport authenticates and
// scopes as REST does: no token is refused at the door, a reader token's write and a
// user-bound token's read of another user are Loom's refusals, as tool errors.
func TestGoMCPClient(t *testing.T) {
	n, url := env.SharedAPI(t)
	writer := env.Token(t, n, auth.NewToken{Org: "acme", Role: auth.RoleWriter})
	reader := env.Token(t, n, auth.NewToken{Org: "acme", Role: auth.RoleReader})
	bob := env.Token(t, n, auth.NewToken{Org: "acme", Role: auth.RoleWriter, ReadUserID: "bob"})
	ns := testenv.Unique(t, "mcp-go")
	httpSession := func(token string) *sdk.ClientSession {
		return goSDKSession(t, &sdk.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}})
	}

	t.Run("http", func(t *testing.T) {
		cs := httpSession(writer)
		res := callTool(t, cs, "memory_set", map[string]any{"namespace": ns, "key": "drink", "value": "the user drinks green tea", "user_id": "alice"})
		if res.IsError {
			t.Fatalf("memory_set: %s", resultText(res))
		}
		res = callTool(t, cs, "memory_history", map[string]any{"namespace": ns, "key": "drink", "user_id": "alice"})
		var h client.HistoryAnswer
		remarshal(t, res.StructuredContent, &h)
		if res.IsError || len(h.Versions) != 1 || h.Versions[0].Event != "memory.written" {
			t.Errorf("memory_history: %s %+v", resultText(res), h)
		}
		res = callTool(t, cs, "memory_list", map[string]any{"namespace": ns})
		var l client.ListAnswer
		remarshal(t, res.StructuredContent, &l)
		if res.IsError || len(l.Memories) != 1 || l.Memories[0].MemoryKey != "drink" {
			t.Errorf("memory_list: %s %+v", resultText(res), l)
		}
		res = callTool(t, cs, "memory_search", map[string]any{"namespace": ns, "query": "Oslo office quarterly revenue"})
		var s client.SearchAnswer
		remarshal(t, res.StructuredContent, &s)
		if res.IsError || !s.Abstain() || !strings.Contains(resultText(res), "Abstain") {
			t.Errorf("an unrelated search: %s %+v: want verdict no_match or below_threshold and the summary telling the model to abstain", resultText(res), s)
		}

		res = callTool(t, httpSession(reader), "memory_set", map[string]any{"namespace": ns, "key": "drink", "value": "coffee"})
		if !res.IsError || !strings.Contains(resultText(res), "PERMISSION_DENIED") {
			t.Errorf("a reader token's write: %s", resultText(res))
		}
		res = callTool(t, httpSession(bob), "memory_get", map[string]any{"namespace": ns, "key": "drink", "user_id": "alice"})
		if !res.IsError || !strings.Contains(resultText(res), "RESOURCE_NOT_FOUND") {
			t.Errorf("bob's token reading alice's memory: %s", resultText(res))
		}

		for _, tok := range []string{"", "loom_000000000000_not-a-token"} {
			req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("/mcp with token %q answered %d, want 401", tok, resp.StatusCode)
			}
		}
	})

	t.Run("stdio", func(t *testing.T) {
		tokenFile := filepath.Join(t.TempDir(), "token")
		os.WriteFile(tokenFile, []byte(writer), 0o600)
		bin := testenv.Build(t, "github.com/loomplane/loom/cmd/loomd")
		cs := goSDKSession(t, &sdk.CommandTransport{Command: exec.Command(bin, "mcp", "--url", url, "--token-file", tokenFile)})
		res := callTool(t, cs, "memory_get", map[string]any{"namespace": ns, "key": "drink", "user_id": "alice"})
		var m client.Memory
		remarshal(t, res.StructuredContent, &m)
		if res.IsError || string(m.Value) != `"the user drinks green tea"` {
			t.Errorf("memory_get over stdio: %s %+v", resultText(res), m)
		}
		res = callTool(t, cs, "memory_set", map[string]any{"namespace": ns, "key": "drink", "value": "the user drinks green tea", "user_id": "alice"})
		var a client.SetAnswer
		remarshal(t, res.StructuredContent, &a)
		if res.IsError || a.Verdict != "restatement" || a.ReinforcementCount != 1 {
			t.Errorf("the same value again over stdio: %s %+v: want a restatement", resultText(res), a)
		}
	})
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
