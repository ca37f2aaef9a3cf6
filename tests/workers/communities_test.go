package workers

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

// The entity_communities pass clusters a namespace's co-occurrence graph with no
// model: entities named together land in one community and a separate group in
// another, which the entity read shows (id, size, members); a token bound to one user
// is not shown the namespace-wide community.
func TestEntityCommunitiesClusterTheGraph(t *testing.T) {
	const org = "communities"
	w := startWorkers(t, org, nil, func(c *config.Config) {
		c.Workers.Communities.Enabled, c.Workers.Communities.Interval = true, 100*time.Millisecond
	})
	ns := testenv.Unique(t, "comm")
	for key, ents := range map[string][]string{
		"m1": {"alice", "acme"}, "m2": {"acme", "berlin"}, "m3": {"alice", "berlin"},
		"m4": {"bob", "globex"}, "m5": {"globex", "paris"},
	} {
		if r := w.c.Put(t, ns, key, map[string]any{"value": "note " + key, "user_id": "u1", "entities": ents}); r.Status != http.StatusOK {
			t.Fatalf("set %s: %d %s", key, r.Status, r.Body)
		}
	}
	community := func(c *testenv.Client, name string) map[string]any {
		t.Helper()
		r := c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/graph/entities/"+name, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("entity %s: %d %s", name, r.Status, r.Body)
		}
		m, _ := r.JSON(t)["community"].(map[string]any)
		return m
	}
	members := func(c map[string]any) []string {
		var out []string
		for _, m := range c["members"].([]any) {
			out = append(out, m.(string))
		}
		return out
	}
	var alice, bob map[string]any
	testenv.Eventually(t, 60*time.Second, "both groups placed in communities", func() bool {
		alice, bob = community(w.c, "alice"), community(w.c, "bob")
		return alice != nil && bob != nil && alice["size"] == float64(3) && bob["size"] == float64(3)
	})
	if got := members(alice); !slices.Equal(got, []string{"acme", "alice", "berlin"}) {
		t.Fatalf("alice's community %v; want acme, alice, berlin", alice)
	}
	if got := members(bob); !slices.Equal(got, []string{"bob", "globex", "paris"}) || bob["id"] == alice["id"] {
		t.Fatalf("bob's community %v; want bob, globex, paris, apart from alice's (%v)", bob, alice["id"])
	}
	bound := testenv.NewClient(w.url, env.Token(t, w.n, auth.NewToken{Org: org, ReadUserID: "u1"}))
	if c := community(bound, "alice"); c != nil {
		t.Fatalf("a token bound to one user was shown the namespace's community %v", c)
	}

	// Search's entity-summary leg serves the community of an entity the query names,
	// citing it; not when evidence_legs leaves it out, nor to the bound token.
	search := func(c *testenv.Client, body string) (hits []any, legs map[string]map[string]any) {
		t.Helper()
		r := c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:search", []byte(body))
		if r.Status != http.StatusOK {
			t.Fatalf("search %s: %d %s", body, r.Status, r.Body)
		}
		a := r.JSON(t)
		ev, _ := a["evidence"].(map[string]any)
		hits, _ = ev["hits"].([]any)
		legs = map[string]map[string]any{}
		explain, _ := a["explain"].(map[string]any)
		for _, l := range explain["evidence_legs"].([]any) {
			m := l.(map[string]any)
			legs[m["leg"].(string)] = m
		}
		return hits, legs
	}
	hits, legs := search(w.c, `{"query": "what goes with globex?", "evidence": true}`)
	if len(hits) != 1 {
		t.Fatalf("the entity summaries for globex: %v (legs %v)", hits, legs)
	}
	h := hits[0].(map[string]any)
	if h["kind"] != "entity_summary" || h["cite"] != "e:"+bob["id"].(string) || h["text"] != "Named together: bob, globex, paris." ||
		h["size"] != float64(3) || fmt.Sprint(h["named"]) != "[globex]" {
		t.Fatalf("the entity summary hit: %v", h)
	}
	if l := legs["entities"]; l["ran"] != true || l["served"] != float64(1) {
		t.Errorf("the entities leg's account: %v", l)
	}
	if hits, legs := search(w.c, `{"query": "what goes with globex?", "evidence": true, "evidence_legs": ["turns", "digests"]}`); len(hits) != 0 ||
		legs["entities"]["ran"] != false {
		t.Errorf("evidence_legs without entities: %v, %v", hits, legs["entities"])
	}
	if hits, legs := search(bound, `{"query": "what goes with globex?", "evidence": true}`); len(hits) != 0 || legs["entities"]["ran"] != false {
		t.Errorf("a token bound to one user was served the namespace's community: %v, %v", hits, legs["entities"])
	}
}
