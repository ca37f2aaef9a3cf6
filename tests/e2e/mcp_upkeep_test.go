package e2e

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// The upkeep tools over the go-sdk's client and loomd's /mcp: an admin sets the
// namespace's profile schema (a schema outside strict mode is refused naming it),
// consolidates a user's near-identical memories (a dry run first, then one model call
// merging them) and undoes the run, each as REST answers it. A writer is refused, and
// an admin bound to alice consolidates alice's memories but neither bob's nor every
// user's, and sets no schema, as REST refuses them.
func TestMCPUpkeepToolsSetTheProfileSchemaAndConsolidate(t *testing.T) {
	srv := llmtest.New(t)
	srv.Script(func(r llmtest.ChatRequest) llmtest.Reply {
		if r.SchemaName != "consolidated_memory" {
			return llmtest.Status(500, "unscripted")
		}
		return llmtest.JSON(map[string]any{"key": "coffee", "summary": "Bo drinks a dark roast coffee every morning, at home"})
	})
	n, url := env.API(t, withProvider(srv))
	org, ns := testenv.Unique(t, "org"), testenv.Unique(t, "mcp-upkeep")
	session := func(tok auth.NewToken) *sdk.ClientSession {
		tok.Org = org
		return goSDKSession(t, &sdk.StreamableClientTransport{Endpoint: url + "/mcp",
			HTTPClient: &http.Client{Transport: bearer{env.Token(t, n, tok)}}})
	}
	admin := session(auth.NewToken{Role: auth.RoleAdmin})
	rest := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleAdmin}))
	rest.AppendOnly(t, ns)
	for key, v := range map[string]string{"coffee-1": "Bo drinks dark roast coffee every morning",
		"coffee-2": "Bo drinks dark roast coffee each morning at home", "coffee-3": "Every morning Bo drinks a dark roast coffee",
		"passport": "Bo's passport expires in 2031"} {
		if r := rest.Put(t, ns, key, map[string]any{"value": v, "user_id": "bo"}); r.Status != http.StatusOK {
			t.Fatalf("set %s: %d %s", key, r.Status, r.Body)
		}
	}
	if r := rest.Put(t, ns, "tea", map[string]any{"value": "alice drinks green tea", "user_id": "alice"}); r.Status != http.StatusOK {
		t.Fatalf("set alice's tea: %d %s", r.Status, r.Body)
	}

	schema := map[string]any{"type": "object", "additionalProperties": false, "required": []any{"drink"},
		"properties": map[string]any{"drink": map[string]any{"type": []any{"string", "null"}}}}
	res := callTool(t, admin, "profile_schema_set", map[string]any{"namespace": ns, "schema": schema})
	var ps client.ProfileSchemaAnswer
	remarshal(t, res.StructuredContent, &ps)
	if res.IsError || ps.Namespace != ns || ps.SchemaHash == "" || !strings.Contains(resultText(res), "profile schema set") {
		t.Fatalf("profile_schema_set: %s %+v", resultText(res), ps)
	}
	res = callTool(t, admin, "profile_schema_set", map[string]any{"namespace": ns, "schema": map[string]any{"type": "object",
		"properties": map[string]any{"drink": map[string]any{"type": "string"}}}})
	if !res.IsError || !strings.Contains(resultText(res), "VALIDATION_FAILED (field schema)") {
		t.Errorf("a schema outside strict mode: %s; want VALIDATION_FAILED naming schema", resultText(res))
	}

	runID := mcpConsolidate(t, admin, ns)
	res = callTool(t, admin, "memory_consolidate_undo", map[string]any{"namespace": ns, "run_id": runID})
	var undo client.ConsolidationUndoAnswer
	remarshal(t, res.StructuredContent, &undo)
	if res.IsError || undo.Restored != 3 || undo.Retired != 1 {
		t.Fatalf("memory_consolidate_undo: %s %+v; want three memories restored and the summary retired", resultText(res), undo)
	}
	if r := rest.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/coffee-2?user_id=bo", nil); r.Status != http.StatusOK {
		t.Errorf("coffee-2 after the undo: %d %s", r.Status, r.Body)
	}
	res = callTool(t, admin, "memory_consolidate_undo", map[string]any{"namespace": ns, "run_id": runID})
	if !res.IsError || !strings.Contains(resultText(res), "PRECONDITION_FAILED") {
		t.Errorf("a second undo: %s; want PRECONDITION_FAILED", resultText(res))
	}

	mcpUpkeepRefusals(t, session, ns)
}

// mcpConsolidate dry-runs then runs memory_consolidate over bo's memories and answers
// the run's id.
func mcpConsolidate(t *testing.T, admin *sdk.ClientSession, ns string) string {
	t.Helper()
	keys := func(cl client.ConsolidateCluster) []string {
		var out []string
		for _, m := range cl.Members {
			out = append(out, m.MemoryKey)
		}
		slices.Sort(out)
		return out
	}
	want := []string{"coffee-1", "coffee-2", "coffee-3"}
	res := callTool(t, admin, "memory_consolidate", map[string]any{"namespace": ns, "user_id": "bo", "dry_run": true, "min_similarity": 0.6})
	var dry client.ConsolidateAnswer
	remarshal(t, res.StructuredContent, &dry)
	if res.IsError || !dry.DryRun || len(dry.Clusters) != 1 || !slices.Equal(keys(dry.Clusters[0]), want) || dry.ModelCalls != 0 ||
		!strings.Contains(resultText(res), "proposed: coffee-") {
		t.Fatalf("memory_consolidate dry run: %s %+v; want the three coffee memories proposed, no model call", resultText(res), dry)
	}
	res = callTool(t, admin, "memory_consolidate", map[string]any{"namespace": ns, "user_id": "bo", "min_similarity": 0.6})
	var run client.ConsolidateAnswer
	remarshal(t, res.StructuredContent, &run)
	if res.IsError || run.RunID == "" || run.MergedRows != 3 || run.ModelCalls != 1 || len(run.Clusters) != 1 ||
		run.Clusters[0].Summary == nil || run.Clusters[0].Summary.MemoryKey != "coffee" || !strings.Contains(resultText(res), run.RunID) {
		t.Fatalf("memory_consolidate: %s %+v; want one cluster of three merged into coffee with one model call", resultText(res), run)
	}
	return run.RunID
}

// mcpUpkeepRefusals: what REST refuses a writer and an admin bound to alice, the tools
// refuse with the same code.
func mcpUpkeepRefusals(t *testing.T, session func(auth.NewToken) *sdk.ClientSession, ns string) {
	t.Helper()
	schema := map[string]any{"type": "object", "additionalProperties": false, "required": []any{}, "properties": map[string]any{}}
	writer := session(auth.NewToken{Role: auth.RoleWriter})
	alice := session(auth.NewToken{Role: auth.RoleAdmin, ReadUserID: "alice"})
	for _, c := range []struct {
		who  string
		cs   *sdk.ClientSession
		tool string
		args map[string]any
	}{
		{"a writer", writer, "profile_schema_set", map[string]any{"namespace": ns, "schema": schema}},
		{"a writer", writer, "memory_consolidate", map[string]any{"namespace": ns, "user_id": "bo", "dry_run": true}},
		{"an admin bound to alice", alice, "profile_schema_set", map[string]any{"namespace": ns, "schema": schema}},
		{"an admin bound to alice", alice, "memory_consolidate", map[string]any{"namespace": ns, "user_id": "bo", "dry_run": true}},
		{"an admin bound to alice", alice, "memory_consolidate", map[string]any{"namespace": ns, "dry_run": true}},
	} {
		res := callTool(t, c.cs, c.tool, c.args)
		if !res.IsError || !strings.Contains(resultText(res), "PERMISSION_DENIED") || strings.Contains(resultText(res), "coffee") {
			t.Errorf("%s: %s %v: %s; want PERMISSION_DENIED", c.who, c.tool, c.args, resultText(res))
		}
	}
	res := callTool(t, alice, "memory_consolidate", map[string]any{"namespace": ns, "user_id": "alice", "dry_run": true})
	var own client.ConsolidateAnswer
	remarshal(t, res.StructuredContent, &own)
	if res.IsError || own.Candidates != 1 || len(own.Clusters) != 0 {
		t.Errorf("an admin bound to alice dry-running alice's memories: %s %+v; want her one memory, no cluster", resultText(res), own)
	}
}
