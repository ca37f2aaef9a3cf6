package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

// The controls that act on the whole deployment take the operator's token, which no
// org token is: an org's admin, even one limited to one namespace, is 403 at a
// projection's reset, and the operator's token reaches no org's memory. A reset of
// a projection that never ran is 404, not a retryable 503.
func TestOperatorControlsNeedTheOperatorsToken(t *testing.T) {
	n, url := env.API(t, nil)
	orgAdmin := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	narrowAdmin := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme", Namespaces: []string{"dev"}}))
	operator := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Role: auth.RoleOperator, Name: "ops"}))
	plan := []byte(`{"to": "latest"}`)
	for name, c := range map[string]*testenv.Client{"an org's admin": orgAdmin, "a namespace's admin": narrowAdmin} {
		if r := c.Do(t, http.MethodPost, "/v1/admin/projections/main:reset", plan); r.Status != http.StatusForbidden || r.ErrorCode() != "PERMISSION_DENIED" {
			t.Fatalf("%s resets the shared projection: %d %s", name, r.Status, r.Body)
		}
	}
	r := operator.Do(t, http.MethodPost, "/v1/admin/projections/main:reset", plan)
	if r.Status != http.StatusOK || r.JSON(t)["executed"] != false || !strings.Contains(string(r.Body), `"partitions"`) {
		t.Fatalf("the operator's dry run: %d %s", r.Status, r.Body)
	}
	if r := operator.Do(t, http.MethodPost, "/v1/admin/projections/nosuch:reset", plan); r.Status != http.StatusNotFound || r.ErrorCode() != "RESOURCE_NOT_FOUND" {
		t.Fatalf("a reset of a projection that never ran: %d %s", r.Status, r.Body)
	}
	for _, call := range testenv.MemoryCalls(testenv.Unique(t, "ops")) {
		if r := operator.Call(t, call); r.Status != http.StatusForbidden || r.ErrorCode() != "PERMISSION_DENIED" {
			t.Fatalf("the operator's token at %s %s: %d %s", call.Method, call.Path, r.Status, r.Body)
		}
	}
	if _, _, err := n.Tokens.Create(t.Context(), auth.NewToken{Org: "acme", Role: auth.RoleOperator}); err == nil {
		t.Fatal("an operator token was created in an org")
	}
}

// GET /v1/health tells anyone but the operator that the process runs and nothing
// more, ?include or not: not the deployment, its versions, index, outbox, replication
// or lag, and never which org's namespaces are behind. The operator's token sees it all.
func TestHealthTellsOnlyTheOperatorItsDetails(t *testing.T) {
	// A projection nobody builds is behind on every namespace written.
	n, url := env.API(t, func(c *config.Config) { c.Pipeline.Projection = "health_unbuilt" })
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "secret-org"}))
	ns := testenv.Unique(t, "secret-ns")
	c.AppendOnly(t, ns)
	c.Set(t, ns, "k", "a fact of a tenant")
	operator := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Role: auth.RoleOperator}))
	callers := map[string]*testenv.Client{
		"anonymous":                testenv.NewClient(url, ""),
		"an org's token":           c,
		"a user-bound admin token": testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "secret-org", ReadUserID: "alice"})),
	}
	for _, path := range []string{"/v1/health", "/v1/health?include=postgres,lag", "/v1/health?include=postgres", "/v1/health?include=lag",
		"/v1/health?include=namespaces,erasures,extractions,topic,workers"} {
		for name, caller := range callers {
			r := caller.Do(t, http.MethodGet, path, nil)
			if r.Status != http.StatusOK || strings.TrimSpace(string(r.Body)) != `{"status":"ok"}` {
				t.Fatalf("%s at %s: %d %s; want only {\"status\":\"ok\"}", name, path, r.Status, r.Body)
			}
		}
	}
	r := operator.Do(t, http.MethodGet, "/v1/health?include=postgres,lag", nil)
	body := r.JSON(t)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"behind":[`) || body["deployment_id"] == nil || body["postgres"] == nil {
		t.Fatalf("the operator's health: %d %s", r.Status, r.Body)
	}
	// Every namespace's standing names this one, behind the unbuilt projection by its one
	// write; the topic's envelopes carry no content, key or value.
	r = operator.Do(t, http.MethodGet, "/v1/health?include=namespaces,topic", nil)
	var standing struct {
		Namespaces struct {
			Listed []struct {
				Org, Namespace   string
				Generation       int64
				ProjectionBehind int64 `json:"projection_behind"`
			}
		}
	}
	if err := json.Unmarshal(r.Body, &standing); err != nil || r.Status != http.StatusOK {
		t.Fatalf("the operator's namespaces: %d %s", r.Status, r.Body)
	}
	listed := false
	for _, s := range standing.Namespaces.Listed {
		if s.Org == "secret-org" && s.Namespace == ns {
			listed = true
			if s.Generation < 1 || s.ProjectionBehind != s.Generation {
				t.Errorf("the namespace's standing %+v; want it behind the unbuilt projection by its generation", s)
			}
		}
	}
	if !listed {
		t.Errorf("the operator's namespaces do not list %s: %s", ns, r.Body)
	}
	if strings.Contains(string(r.Body), "a fact of a tenant") {
		t.Errorf("the operator's health shows a memory's value: %s", r.Body)
	}
	if r := testenv.NewClient(url, "loom_000000000000_bm90LWEtcmVhbC10b2tlbg").Do(t, http.MethodGet, "/v1/health?include=lag", nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("a wrong token at health: %d %s", r.Status, r.Body)
	}
}
