package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// retrievalRows are a few facts with an identifier, a person and a place in them.
var retrievalRows = []struct{ key, value string }{
	{"billing.owner", "Priya Raman owns the billing service and its invoices"},
	{"incident.ops4411", "incident OPS-4411 was the billing outage caused by an expired certificate"},
	{"office.berlin", "the berlin office is on torstrasse near the river"},
	{"release.train", "the release train leaves every second thursday morning"},
	{"editor.favourite", "Priya prefers the helix editor with a dark theme"},
}

func writeRetrievalRows(t *testing.T, e *phaseEnv) {
	for _, r := range retrievalRows {
		typedSet(t, e.c, e.ns, r.key, client.SetRequest{Value: r.value})
	}
}

// settingOf reads one field of the explain block's settled settings.
func settingOf(t *testing.T, a *client.SearchAnswer, field string) any {
	t.Helper()
	if a.Explain == nil {
		t.Fatalf("the answer has no explain block: %+v", a)
	}
	var s map[string]any
	if err := json.Unmarshal(a.Explain.Settings, &s); err != nil {
		t.Fatalf("explain.settings: %v", err)
	}
	return s[field]
}

// A namespace's retrieval_defaults and a request's recipe settle what a search runs,
// within bounds; the planner's reading and the verdict's gates are in the answer; a
// query naming an identifier no hit holds abstains, or says so when asked to annotate.
func TestRetrievalDefaultsPlannerAndGrounding(t *testing.T) {
	e := newPhaseEnv(t, map[string]any{"conflict_policy": "append_only", "retrieval_defaults": map[string]any{"recipe": "precise", "pool": 50}})
	writeRetrievalRows(t, e)

	a := e.search(e.c, "who owns the billing service", client.SearchRequest{})
	if a.Verdict != client.VerdictOK || a.Hits[0].MemoryKey != "billing.owner" {
		t.Fatalf("answerable query: %s %v", a.Verdict, answerKeys(a))
	}
	if r, p := settingOf(t, a, "recipe"), settingOf(t, a, "pool"); r != "precise" || p != 50.0 {
		t.Errorf("the namespace's defaults: recipe %v, pool %v, want precise and 50", r, p)
	}
	if legs := settingOf(t, a, "legs"); len(legs.([]any)) != 3 {
		t.Errorf("precise runs vector, lexical and key: %v", legs)
	}
	if len(a.Explain.Gates) < 2 || a.Explain.Gates[0].Name != "hits" || a.RetrievalRisk.Level == "" || a.RetrievalRisk.Components.Calibration == "" {
		t.Errorf("gates %+v, risk %+v", a.Explain.Gates, a.RetrievalRisk)
	}
	broad := e.search(e.c, "who owns the billing service", client.SearchRequest{Recipe: "broad", Pool: 300})
	if r, p := settingOf(t, broad, "recipe"), settingOf(t, broad, "pool"); r != "broad" || p != 300.0 {
		t.Errorf("the request's recipe and pool: %v, %v", r, p)
	}

	// Out of bounds, on a request or in a namespace's defaults: 422, nothing stored.
	for _, bad := range []client.SearchRequest{{Recipe: "fastest"}, {Pool: 5}, {Legs: []string{"sql"}}, {Legs: []string{"graph"}}, {Grounding: "maybe"}} {
		bad.Query = "billing"
		_, err := e.c.Typed(t).Search(context.Background(), e.ns, bad)
		if ae, ok := client.AsError(err); !ok || ae.Status != http.StatusUnprocessableEntity {
			t.Errorf("search %+v: %v, want 422", bad, err)
		}
	}
	body, _ := json.Marshal(map[string]any{"conflict_policy": "append_only", "retrieval_defaults": map[string]any{"min_score": 3}})
	if r := e.c.Do(t, http.MethodPut, "/v1/namespaces/"+e.ns, body); r.Status != http.StatusUnprocessableEntity {
		t.Errorf("retrieval_defaults.min_score 3: %d %s, want 422", r.Status, r.Body)
	}

	// Identifier grounding: the stored code answers, another code abstains (or is named).
	if a := e.search(e.c, "what caused incident OPS-4411", client.SearchRequest{}); a.Verdict != client.VerdictOK || a.Hits[0].MemoryKey != "incident.ops4411" {
		t.Errorf("a stored code: %s %v", a.Verdict, answerKeys(a))
	}
	a = e.search(e.c, "what caused incident OPS-9917", client.SearchRequest{})
	if a.Verdict != client.VerdictUngrounded || !slices.Contains(a.Grounding.Missing, "OPS-9917") ||
		!slices.Contains(a.RetrievalRisk.Components.MissingIdentifiers, "OPS-9917") || a.RetrievalRisk.Level != "high" {
		t.Errorf("a code never stored: verdict %s, grounding %+v, risk %+v", a.Verdict, a.Grounding, a.RetrievalRisk)
	}
	a = e.search(e.c, "what caused incident OPS-9917", client.SearchRequest{Grounding: "annotate"})
	if a.Verdict == client.VerdictUngrounded || !slices.Contains(a.Grounding.Missing, "OPS-9917") {
		t.Errorf("annotate: verdict %s, missing %v", a.Verdict, a.Grounding.Missing)
	}

	// The planner's reading is in the explain block.
	plan := e.search(e.c, "what is Priya's favourite editor", client.SearchRequest{}).Explain.Plan
	if !plan.Preference || !slices.ContainsFunc(plan.Entities, func(s string) bool { return s == "Priya" || s == "Priya's" }) {
		t.Errorf("preference and entity: %+v", plan)
	}
	plan = e.search(e.c, "what changed in the release train last week", client.SearchRequest{}).Explain.Plan
	if len(plan.Dates) == 0 || !plan.Dates[0].Relative || !plan.Dates[0].From.Before(plan.Dates[0].To) {
		t.Errorf("relative date: %+v", plan.Dates)
	}
	if plan = e.search(e.c, "who owns billing and where is the berlin office", client.SearchRequest{}).Explain.Plan; len(plan.SubQueries) < 2 {
		t.Errorf("sub-queries: %+v", plan.SubQueries)
	}
}

// A search that asks keeps its trace, readable by id within the org and the token's
// reach; the reranker reorders a page and fails open, keeping the fused order.
func TestSearchTraceAndReranker(t *testing.T) {
	srv := llmtest.New(t)
	n, url := env.API(t, func(c *config.Config) {
		c.LLM.BaseURL, c.LLM.Model = srv.URL, "m"
		c.Command.Extraction.QueueEnabled = false // another test's deferred request would reach this script
		c.Query.Retrieval.Reranker = "llm"
	})
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	e := &phaseEnv{t: t, c: c, pool: env.PG(t), ns: testenv.Unique(t, "rr"), org: "acme"}
	c.AppendOnly(t, e.ns)
	writeRetrievalRows(t, e)
	query := "billing service invoices outage"

	fused := e.search(c, query, client.SearchRequest{Rerank: new(bool), Trace: true})
	if fused.Explain.Rerank.Status != "off" || len(fused.Hits) < 2 || fused.TraceID == "" {
		t.Fatalf("rerank off: %+v, %d hits, trace %q", fused.Explain.Rerank, len(fused.Hits), fused.TraceID)
	}
	tr, err := c.Typed(t).SearchTrace(context.Background(), fused.TraceID)
	if err != nil {
		t.Fatalf("search_trace: %v", err)
	}
	var trace struct {
		Query string `json:"query"`
		Legs  []struct {
			Leg  string `json:"leg"`
			Hits []any  `json:"hits"`
		} `json:"legs"`
		Fusion  []any  `json:"fusion"`
		Served  []any  `json:"served"`
		Gates   []any  `json:"gates"`
		Verdict string `json:"verdict"`
	}
	if err := json.Unmarshal(tr.Trace, &trace); err != nil {
		t.Fatal(err)
	}
	if trace.Query != query || len(trace.Legs) < 3 || len(trace.Fusion) < len(fused.Hits) || len(trace.Served) != len(fused.Hits) ||
		len(trace.Gates) == 0 || trace.Verdict != fused.Verdict || !tr.ExpiresAt.After(tr.CreatedAt) {
		t.Errorf("trace: %s", tr.Trace)
	}
	other := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "globex"}))
	if _, err := other.Typed(t).SearchTrace(context.Background(), fused.TraceID); !isStatus(err, http.StatusNotFound) {
		t.Errorf("another org read the trace: %v", err)
	}

	// The model scores the passages in reverse of the fused order: the page follows it.
	sent := len(fused.Hits)
	scores := make([]float64, sent)
	for i := range scores {
		scores[i] = float64(i)
	}
	srv.Reply(llmtest.JSON(map[string]any{"scores": scores}))
	a := e.search(c, query, client.SearchRequest{})
	if a.Explain.Rerank.Status != "reordered" || a.Explain.Rerank.Sent != sent ||
		a.Hits[0].MemoryKey != fused.Hits[sent-1].MemoryKey || a.Hits[0].Scores.Rerank == nil {
		t.Errorf("reranked: %+v, %v (fused %v)", a.Explain.Rerank, answerKeys(a), answerKeys(fused))
	}
	if a.Verdict != fused.Verdict {
		t.Errorf("the reranker changed the verdict: %s, fused %s", a.Verdict, fused.Verdict)
	}

	// A failing model leaves the fused order and says so in the risk.
	srv.Reply(llmtest.Status(http.StatusBadRequest, "no"))
	a = e.search(c, query, client.SearchRequest{})
	if a.Explain.Rerank.Status != "failed" || !slices.Equal(answerKeys(a), answerKeys(fused)) || !a.RetrievalRisk.Components.RerankFailed {
		t.Errorf("failed reranker: %+v, %v (fused %v), risk %+v", a.Explain.Rerank, answerKeys(a), answerKeys(fused), a.RetrievalRisk.Components)
	}
}
