package e2e

import (
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// An agent promotes its user's fact and records a decision over MCP: another user's
// search finds the fact with its provenance, and the decision memory holds its rationale.
func TestAgentPromotesAndRecordsADecisionOverMCP(t *testing.T) {
	n, admin, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "mcp-shared")
	aliceToken := env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleWriter, ReadUserID: "alice"})
	cs := goSDKSession(t, &sdk.StreamableClientTransport{Endpoint: admin.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{aliceToken}}})
	if res := callTool(t, cs, "memory_set", map[string]any{"namespace": ns, "key": "vpn", "value": "the office vpn endpoint is vpn2.example.org"}); res.IsError {
		t.Fatalf("memory_set: %s", resultText(res))
	}
	res := callTool(t, cs, "memory_promote", map[string]any{"namespace": ns, "key": "vpn"})
	if res.IsError || !strings.Contains(resultText(res), "promoted") {
		t.Fatalf("memory_promote: %s", resultText(res))
	}
	bob := testenv.NewClient(admin.URL, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleReader, ReadUserID: "bob"}))
	if pv := sharedHits(t, bob, ns, "what is the vpn endpoint", nil)["vpn"]; pv == nil || pv["source_user_id"] != "alice" {
		t.Fatalf("bob's search after the agent's promotion: %v", pv)
	}
	res = callTool(t, cs, "decision_record", map[string]any{"namespace": ns, "key": "vpn-vendor", "decision": "keep the current vpn vendor",
		"rationale": "the contract runs until 2028", "decided_by": "it steering group"})
	if res.IsError || !strings.Contains(resultText(res), "decided by it steering group") {
		t.Fatalf("decision_record: %s", resultText(res))
	}
	got := admin.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/vpn-vendor?user_id=alice", nil)
	if got.Status != http.StatusOK || !strings.Contains(string(got.Body), "contract runs until 2028") {
		t.Fatalf("the decision memory: %d %s", got.Status, got.Body)
	}
}
