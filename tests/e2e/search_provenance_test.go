package e2e

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/tests/testenv"
)

// provenanceQuery finds the three rows writeProvenanceRows writes.
const provenanceQuery = "harbour survey report"

// writeProvenanceRows writes three rows the provenance filters tell apart: one naming
// Harbour Survey, one imported naming it and Lotte, one verified naming nothing.
func writeProvenanceRows(t *testing.T, c *testenv.Client, ns string) {
	t.Helper()
	typedSet(t, c, ns, "survey.direct", client.SetRequest{Value: "the harbour survey report goes out on Friday",
		Entities: []client.Entity{{Name: "Harbour Survey"}}})
	typedSet(t, c, ns, "survey.imported", client.SetRequest{Value: "harbour survey report: Lotte signs it off before it goes out",
		Entities: []client.Entity{{Name: "Harbour Survey"}, {Name: "Lotte"}}, SourceClass: "imported"})
	typedSet(t, c, ns, "survey.checked", client.SetRequest{Value: "the harbour survey report needs the tide tables in an appendix"})
	if r := c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories/survey.checked:verify", []byte(`{}`)); r.Status != http.StatusOK {
		t.Fatalf("verify: %d %s", r.Status, r.Body)
	}
}

// memory.search narrows its hits to rows naming entities, of source classes, or
// verified, judged on the rows' heads; a bad filter is a 422 naming its field.
func TestSearchFiltersOnEntitiesSourceClassAndVerified(t *testing.T) {
	e := newPhaseEnv(t, map[string]any{"conflict_policy": "append_only"})
	writeProvenanceRows(t, e.c, e.ns)
	q := provenanceQuery
	all := answerKeys(e.search(e.c, q, client.SearchRequest{}))
	for _, k := range []string{"survey.direct", "survey.imported", "survey.checked"} {
		if !slices.Contains(all, k) {
			t.Fatalf("unfiltered: %v lacks %s", all, k)
		}
	}
	yes, no := true, false
	for _, c := range []struct {
		name string
		req  client.SearchRequest
		want []string
	}{
		{"both entities", client.SearchRequest{Entities: []string{"harbour  SURVEY", "Lotte"}}, []string{"survey.imported"}},
		{"one entity", client.SearchRequest{Entities: []string{"Harbour Survey"}}, []string{"survey.direct", "survey.imported"}},
		{"imported", client.SearchRequest{SourceClass: []string{"imported"}}, []string{"survey.imported"}},
		{"direct", client.SearchRequest{SourceClass: []string{"direct"}}, []string{"survey.checked", "survey.direct"}},
		{"verified", client.SearchRequest{Verified: &yes}, []string{"survey.checked"}},
		{"not verified", client.SearchRequest{Verified: &no}, []string{"survey.direct", "survey.imported"}},
	} {
		got := answerKeys(e.search(e.c, q, c.req))
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: served %v, want %v", c.name, got, c.want)
		}
	}
	for _, bad := range []struct{ body, field string }{
		{`{"query": "x", "source_class": ["gossip"]}`, "source_class"},
		{`{"query": "x", "entities": ["  "]}`, "entities"},
	} {
		r := e.c.Do(t, http.MethodPost, "/v1/namespaces/"+e.ns+"/memories:search", []byte(bad.body))
		body, _ := r.JSON(t)["error"].(map[string]any)
		if r.Status != http.StatusUnprocessableEntity || r.ErrorCode() != "VALIDATION_FAILED" || body["field"] != bad.field {
			t.Errorf("%s: %d %s", bad.body, r.Status, r.Body)
		}
	}
}

// Provenance trust in the ranking's tail: of two rows the legs score alike, the
// verified one ranks first (with the tie broken by key alone, trust.a would).
func TestSearchRanksAVerifiedRowAboveItsTwin(t *testing.T) {
	e := newPhaseEnv(t, map[string]any{"conflict_policy": "append_only"})
	at := time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)
	typedSet(t, e.c, e.ns, "trust.a", client.SetRequest{Value: "the ferry to the island leaves at seven", ValidAt: at})
	typedSet(t, e.c, e.ns, "trust.b", client.SetRequest{Value: "the ferry to the island leaves at seven.", ValidAt: at})
	if r := e.c.Do(t, http.MethodPost, "/v1/namespaces/"+e.ns+"/memories/trust.b:verify", []byte(`{}`)); r.Status != http.StatusOK {
		t.Fatalf("verify: %d %s", r.Status, r.Body)
	}
	a := e.search(e.c, "when does the ferry to the island leave", client.SearchRequest{SetExpansion: new(bool)})
	if got := answerKeys(a); len(got) < 2 || got[0] != "trust.b" {
		t.Fatalf("ranked %v, want the verified trust.b first", got)
	}
	if tr := a.Hits[0].Scores.Trust; tr == nil || *tr <= 0 {
		t.Errorf("the verified row's scores carry no trust: %+v", a.Hits[0].Scores)
	}
	if a.Hits[0].Scores.Fused != a.Hits[1].Scores.Fused {
		t.Errorf("the twins' legs differ (%v vs %v): the test no longer isolates trust", a.Hits[0].Scores.Fused, a.Hits[1].Scores.Fused)
	}
}
