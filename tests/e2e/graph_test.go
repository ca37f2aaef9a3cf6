package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// graphNS is a namespace for a graph test, with its predicates' cardinalities declared.
type graphNS struct {
	t  *testing.T
	c  *testenv.Client
	ns string
}

func newGraphNS(t *testing.T, policy string) *graphNS {
	t.Helper()
	n, base := env.SharedAPI(t)
	g := &graphNS{t: t, c: testenv.NewClient(base, env.Token(t, n, auth.NewToken{Org: "acme"})), ns: testenv.Unique(t, "graph")}
	g.c.Configure(t, g.ns, map[string]any{"conflict_policy": policy,
		"relations": map[string]string{"lives_in": "single", "visited": "multi"}})
	return g
}

// rel is one relation of a write.
func rel(s, p, o string, fromTo ...*time.Time) map[string]any {
	r := map[string]any{"subject": s, "predicate": p, "object": o}
	if len(fromTo) > 0 && fromTo[0] != nil {
		r["valid_from"] = fromTo[0].Format(time.RFC3339)
	}
	if len(fromTo) > 1 && fromTo[1] != nil {
		r["valid_to"] = fromTo[1].Format(time.RFC3339)
	}
	return r
}

// set writes body (memory.set) under key and fails the test unless it answers 200.
func (g *graphNS) set(key string, body map[string]any) map[string]any {
	g.t.Helper()
	b, _ := json.Marshal(body)
	r := g.c.Do(g.t, http.MethodPut, "/v1/namespaces/"+g.ns+"/memories/"+url.PathEscape(key), b)
	if r.Status != http.StatusOK {
		g.t.Fatalf("set %s: %d %s", key, r.Status, r.Body)
	}
	return r.JSON(g.t)
}

// entity reads the graph's entity with the query string q.
func (g *graphNS) entity(c *testenv.Client, name, q string) *testenv.Response {
	g.t.Helper()
	path := "/v1/namespaces/" + g.ns + "/graph/entities/" + url.PathEscape(name)
	if q != "" {
		path += "?" + q
	}
	return c.Do(g.t, http.MethodGet, path, nil)
}

type graphFact struct {
	Subject, Predicate, Object string
	ValidFrom                  time.Time  `json:"valid_from"`
	ValidTo                    *time.Time `json:"valid_to"`
	InvalidAt                  *time.Time `json:"invalid_at"`
	Restored                   bool
	Fallback                   bool
	Open                       bool
	Rows                       []struct {
		MemoryID string `json:"memory_id"`
		UserID   string `json:"user_id"`
		Holds    bool
	}
}

type graphAnswer struct {
	Name    string
	Type    string
	Aliases []string
	Facts   []graphFact
	Edges   []struct {
		Entity string
		Weight int
		Open   bool
	}
}

func (g *graphNS) read(name, q string) graphAnswer {
	g.t.Helper()
	r := g.entity(g.c, name, q)
	if r.Status != http.StatusOK {
		g.t.Fatalf("entity %s?%s: %d %s", name, q, r.Status, r.Body)
	}
	var a graphAnswer
	if err := json.Unmarshal(r.Body, &a); err != nil {
		g.t.Fatal(err)
	}
	return a
}

// objects lists the objects of the answer's facts of predicate, with a mark for the
// closed ones.
func objects(a graphAnswer, predicate string) string {
	var out []string
	for _, f := range a.Facts {
		if f.Predicate != predicate {
			continue
		}
		s := f.Object
		if !f.Open {
			s += "(closed)"
		}
		out = append(out, s)
	}
	return strings.Join(out, ",")
}

func fact(t *testing.T, a graphAnswer, predicate, object string, restored bool) graphFact {
	t.Helper()
	for _, f := range a.Facts {
		if f.Predicate == predicate && f.Object == object && f.Restored == restored {
			return f
		}
	}
	t.Fatalf("no %s %s fact (restored %v) in %+v", predicate, object, restored, a.Facts)
	return graphFact{}
}

// "I live in London", then "I live in Paris": London closes when Paris starts.
func TestGraphLondonClosesWhenParisStarts(t *testing.T) {
	g := newGraphNS(t, "append_only")
	g.set("home-1", map[string]any{"value": "I live in London", "entities": []any{"user", map[string]any{"name": "London", "type": "city"}},
		"relations": []any{rel("user", "lives in", "London")}})
	g.set("home-2", map[string]any{"value": "I live in Paris", "relations": []any{rel("User", "lives_in", "Paris")}})

	if a := g.read("user", ""); objects(a, "lives_in") != "paris" {
		t.Fatalf("open facts of user: %+v, want Paris alone", a.Facts)
	}
	a := g.read("user", "include_closed=true")
	london, paris := fact(t, a, "lives_in", "london", false), fact(t, a, "lives_in", "paris", false)
	if london.Open || london.InvalidAt == nil || london.ValidTo == nil || !london.ValidTo.Equal(paris.ValidFrom) {
		t.Fatalf("London %+v: closed when Paris (from %s) starts", london, paris.ValidFrom)
	}
	if !paris.Open || paris.ValidTo != nil || len(paris.Rows) != 1 || !paris.Rows[0].Holds {
		t.Fatalf("Paris %+v: open, held by its row", paris)
	}
	city := g.read("London", "include_closed=true")
	if city.Name != "london" || city.Type != "city" || strings.Join(city.Aliases, ",") != "London" || objects(city, "lives_in") != "london(closed)" {
		t.Fatalf("entity london: %+v", city)
	}
	if len(city.Edges) != 1 || city.Edges[0].Entity != "user" || city.Edges[0].Weight != 1 {
		t.Fatalf("london's edges: %+v, want the one with user", city.Edges)
	}
	if r := g.entity(g.c, "nobody", ""); r.Status != http.StatusNotFound {
		t.Fatalf("an entity nobody named: %d %s", r.Status, r.Body)
	}
}

// When the newer value goes away (its row revised to say something else), the older
// value a row still holds is current again from then on: never neither.
func TestGraphOneValueStaysCurrentWhenTheNewerGoesAway(t *testing.T) {
	g := newGraphNS(t, "append_only")
	g.set("home-1", map[string]any{"value": "I live in London", "relations": []any{rel("user", "lives_in", "London")}})
	g.set("home-2", map[string]any{"value": "I live in Paris", "relations": []any{rel("user", "lives_in", "Paris")}})
	revised := g.set("home-2", map[string]any{"value": "I like Paris", "relations": []any{}})
	a := g.read("user", "include_closed=true")
	if paris := fact(t, a, "lives_in", "paris", false); paris.Open || paris.InvalidAt == nil {
		t.Fatalf("Paris %+v: closed once no row states it", paris)
	}
	var again *graphFact
	for i, f := range a.Facts {
		if f.Object == "london" && f.Open {
			again = &a.Facts[i]
		}
	}
	if again == nil || !again.Fallback || again.ValidTo != nil || len(again.Rows) != 1 || !again.Rows[0].Holds {
		t.Fatalf("facts %+v: London current again, held by its row", a.Facts)
	}
	if revised["written"] != true || objects(g.read("user", ""), "lives_in") != "london" {
		t.Fatalf("open facts: %s", objects(g.read("user", ""), "lives_in"))
	}
}

// A dated Berlin from a day ahead, written before an undated Paris: Paris is current
// until Berlin begins, and Berlin from then on.
func TestGraphDatedBerlinWrittenBeforeUndatedParis(t *testing.T) {
	g := newGraphNS(t, "append_only")
	dec1 := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 20)
	g.set("move", map[string]any{"value": "Moving to Berlin on Dec 1", "relations": []any{rel("user", "lives_in", "Berlin", &dec1)}})
	g.set("home", map[string]any{"value": "I live in Paris", "relations": []any{rel("user", "lives_in", "Paris")}})

	a := g.read("user", "")
	paris, berlin := fact(t, a, "lives_in", "paris", false), fact(t, a, "lives_in", "berlin", false)
	if !paris.Open || paris.ValidTo == nil || !paris.ValidTo.Equal(dec1) || paris.InvalidAt == nil {
		t.Fatalf("Paris %+v: current until Berlin begins on %s", paris, dec1)
	}
	if !berlin.Open || !berlin.ValidFrom.Equal(dec1) || berlin.ValidTo != nil {
		t.Fatalf("Berlin %+v: from %s on", berlin, dec1)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	if got := objects(g.read("user", "as_of="+now), "lives_in"); got != "paris" {
		t.Fatalf("as of now: %s, want paris", got)
	}
	later := dec1.AddDate(0, 0, 1).Format(time.RFC3339)
	if got := objects(g.read("user", "as_of="+later), "lives_in"); got != "berlin" {
		t.Fatalf("as of %s: %s, want berlin", later, got)
	}
}

// "London until December" stays current beside a newer value, until its own end.
func TestGraphValueWithItsOwnEndStaysBesideANewerOne(t *testing.T) {
	g := newGraphNS(t, "append_only")
	december := time.Now().UTC().Truncate(time.Second).AddDate(0, 2, 0)
	g.set("home", map[string]any{"value": "I live in London until December", "relations": []any{rel("user", "lives_in", "London", nil, &december)}})
	g.set("plan", map[string]any{"value": "I live in Paris", "relations": []any{rel("user", "lives_in", "Paris")}})
	a := g.read("user", "")
	london := fact(t, a, "lives_in", "london", false)
	if !london.Open || london.InvalidAt != nil || london.ValidTo == nil || !london.ValidTo.Equal(december) {
		t.Fatalf("London %+v: open until its own end %s", london, december)
	}
	if paris := fact(t, a, "lives_in", "paris", false); !paris.Open || paris.ValidTo != nil {
		t.Fatalf("Paris %+v: open", paris)
	}
	after := december.AddDate(0, 0, 1).Format(time.RFC3339)
	if got := objects(g.read("user", "as_of="+after), "lives_in"); got != "paris" {
		t.Fatalf("after December: %s, want paris", got)
	}
}

// A retirement closes the loser's facts the winner does not state, and an Undo of it
// reopens them, seen from the restore on: the restored value is the current one.
func TestGraphRetirementClosesTheLosersFactAndUndoReopensIt(t *testing.T) {
	g := newGraphNS(t, "newest_wins")
	loser := g.set("trip", map[string]any{"value": "I live in London and visited Rome", "session_id": "s1",
		"relations": []any{rel("user", "lives_in", "London"), rel("user", "visited", "Rome")}})
	winner := g.set("trip", map[string]any{"value": "I live in Paris and visited Oslo", "session_id": "s2",
		"relations": []any{rel("user", "lives_in", "Paris"), rel("user", "visited", "Oslo")}})
	if sup, _ := winner["superseded"].([]any); len(sup) != 1 || sup[0] != loser["memory_id"] {
		t.Fatalf("the second session's write did not retire the first: %v", winner)
	}
	a := g.read("user", "include_closed=true")
	rome := fact(t, a, "visited", "rome", false)
	if rome.Open || rome.InvalidAt == nil || len(rome.Rows) != 1 || rome.Rows[0].Holds {
		t.Fatalf("Rome %+v: the retirement closes the loser's fact", rome)
	}
	if got := objects(g.read("user", ""), "lives_in") + "|" + objects(g.read("user", ""), "visited"); got != "paris|oslo" {
		t.Fatalf("open facts after the retirement: %s", got)
	}

	body, _ := json.Marshal(map[string]any{"session_id": "s1"})
	r := g.c.Do(t, http.MethodPost, "/v1/namespaces/"+g.ns+"/memories/trip:restore", body)
	if r.Status != http.StatusOK {
		t.Fatalf("restore: %d %s", r.Status, r.Body)
	}
	a = g.read("user", "include_closed=true")
	marker := fact(t, a, "lives_in", "london", true)
	romeAgain := fact(t, a, "visited", "rome", true)
	paris := fact(t, a, "lives_in", "paris", false)
	if !marker.Open || !romeAgain.Open || marker.ValidTo != nil {
		t.Fatalf("after the Undo: London %+v, Rome %+v: open again", marker, romeAgain)
	}
	if paris.Open || paris.ValidTo == nil || !paris.ValidTo.Equal(marker.ValidFrom) {
		t.Fatalf("Paris %+v: closes when the restored London is seen (%s)", paris, marker.ValidFrom)
	}
	if got := objects(g.read("user", ""), "visited"); got != "oslo,rome" {
		t.Fatalf("visited after the Undo: %s, want both", got)
	}
}

// A high row holds the edges of the entities its writer declared, never a fact; a
// proposal's entities co-occur too, but it states no fact until it is one.
func TestGraphHighRowsAndProposalsHoldOnlyEdges(t *testing.T) {
	g := newGraphNS(t, "append_only")
	g.set("secret", map[string]any{"value": "Alice told Bob the launch date", "sensitivity": "high",
		"entities": []any{"Alice", "Bob"}, "relations": []any{rel("Alice", "told", "Carol")}})
	g.set("idea", map[string]any{"value": "Maybe Dana runs the offsite", "proposed": true,
		"relations": []any{rel("Dana", "runs", "Offsite")}})
	alice := g.read("alice", "include_closed=true")
	if len(alice.Facts) != 0 || len(alice.Edges) != 1 || alice.Edges[0].Entity != "bob" {
		t.Fatalf("alice: %+v, want the edge with Bob and no fact", alice)
	}
	if r := g.entity(g.c, "carol", ""); r.Status != http.StatusNotFound {
		t.Fatalf("carol, named only in a high row's relation: %d %s", r.Status, r.Body)
	}
	dana := g.read("dana", "include_closed=true")
	if len(dana.Facts) != 0 || len(dana.Edges) != 1 || dana.Edges[0].Entity != "offsite" {
		t.Fatalf("dana: %+v, want the proposal's edge and no fact", dana)
	}
}

// A token bound to one user sees only the facts and edges its user's rows name.
func TestGraphReadScope(t *testing.T) {
	g := newGraphNS(t, "append_only")
	n, base := env.SharedAPI(t)
	alice := testenv.NewClient(base, env.Token(t, n, auth.NewToken{Org: "acme", Role: auth.RoleWriter, ReadUserID: "alice"}))
	bob := testenv.NewClient(base, env.Token(t, n, auth.NewToken{Org: "acme", Role: auth.RoleWriter, ReadUserID: "bob"}))
	for _, w := range []struct {
		c    *testenv.Client
		rels []any
	}{{alice, []any{rel("Acme", "hq_in", "London")}}, {bob, []any{rel("Acme", "ceo", "Zed")}}} {
		b, _ := json.Marshal(map[string]any{"value": "a fact about acme", "relations": w.rels})
		if r := w.c.Do(t, http.MethodPut, "/v1/namespaces/"+g.ns+"/memories/acme", b); r.Status != http.StatusOK {
			t.Fatalf("write: %d %s", r.Status, r.Body)
		}
	}
	for _, c := range []struct {
		client *testenv.Client
		want   string
	}{{alice, "hq_in london"}, {bob, "ceo zed"}, {g.c, "ceo zed,hq_in london"}} {
		r := g.entity(c.client, "acme", "")
		var a graphAnswer
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &a) != nil {
			t.Fatalf("entity: %d %s", r.Status, r.Body)
		}
		var got []string
		for _, f := range a.Facts {
			got = append(got, f.Predicate+" "+f.Object)
		}
		if strings.Join(got, ",") != c.want {
			t.Fatalf("facts seen: %v, want %s", got, c.want)
		}
	}
	if r := g.entity(alice, "zed", ""); r.Status != http.StatusNotFound {
		t.Fatalf("alice reads an entity only bob's rows name: %d %s", r.Status, r.Body)
	}
}

// The graph option adds a leg: the rows naming the query's entities and, one edge
// away, their neighbours' rows.
func TestSearchGraphLegExpandsOneHop(t *testing.T) {
	g := newGraphNS(t, "append_only")
	g.set("lead", map[string]any{"value": "Alice leads the platform team", "entities": []any{"Alice", "Platform Team"}})
	g.set("ships", map[string]any{"value": "That group ships the deploy pipeline every week", "entities": []any{"Platform Team", "Deploy Pipeline"}})
	g.set("other", map[string]any{"value": "The cafeteria serves soup on mondays", "entities": []any{"Cafeteria"}})
	search := func(graph bool) map[string]map[string]any {
		b, _ := json.Marshal(map[string]any{"query": "what does Alice do", "top_k": 10, "graph": graph})
		byKey := map[string]map[string]any{}
		for _, h := range hits(t, g.c.Do(t, http.MethodPost, "/v1/namespaces/"+g.ns+"/memories:search", b)) {
			byKey[h["memory_key"].(string)] = h["scores"].(map[string]any)
		}
		return byKey
	}
	with := search(true)
	if with["lead"]["graph"] != 1.0 || with["ships"]["graph"] != 0.5 {
		t.Fatalf("graph scores: lead %v, ships %v; want 1 (names Alice) and 0.5 (one hop)", with["lead"], with["ships"])
	}
	if s, ok := with["other"]; ok && s["graph"] != 0.0 {
		t.Fatalf("the unrelated row has a graph score: %v", s)
	}
	if _, ok := search(false)["lead"]["graph"]; ok {
		t.Fatal("a search without the graph option reports a graph score")
	}
}

// Entities, relations and cardinalities are validated, naming the field.
func TestGraphInputIsValidated(t *testing.T) {
	g := newGraphNS(t, "append_only")
	for _, c := range []struct {
		body  string
		field string
	}{
		{`{"value": "x", "relations": [{"subject": "a", "predicate": "p"}]}`, "relations[0].object"},
		{`{"value": "x", "relations": [{"subject": "a", "predicate": "p", "object": "b", "cardinality": "single"}]}`, "relations[0].cardinality"},
		{`{"value": "x", "relations": [{"subject": "a", "predicate": "p", "object": "b", "valid_from": "2026-02-01T00:00:00Z", "valid_to": "2026-01-01T00:00:00Z"}]}`, "relations[0].valid_to"},
		{`{"value": "x", "entities": [{"name": "a", "kind": "b"}]}`, "entities[0]"},
		{`{"value": "x", "relations": [` + strings.Repeat(`{"subject": "a", "predicate": "p", "object": "b"},`, 8) + `{"subject": "a", "predicate": "p", "object": "b"}]}`, "relations"},
	} {
		r := g.c.Do(t, http.MethodPut, "/v1/namespaces/"+g.ns+"/memories/k", []byte(c.body))
		var e struct{ Error struct{ Code, Field string } }
		json.Unmarshal(r.Body, &e)
		if r.Status != http.StatusUnprocessableEntity || e.Error.Code != "VALIDATION_FAILED" || e.Error.Field != c.field {
			t.Fatalf("%s: %d %s, want 422 naming %s", c.body, r.Status, r.Body, c.field)
		}
	}
	b, _ := json.Marshal(map[string]any{"relations": map[string]string{"lives_in": "one"}})
	if r := g.c.Do(t, http.MethodPut, "/v1/namespaces/"+g.ns, b); r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), "relations.lives_in") {
		t.Fatalf("a cardinality other than single or multi: %d %s", r.Status, r.Body)
	}
	// A copy carries the head's entities and relations, and a point read shows them.
	g.set("pinned", map[string]any{"value": "x", "entities": []any{"Zoe"}, "relations": []any{rel("zoe", "visited", "oslo")}})
	if r := g.c.Do(t, http.MethodPost, "/v1/namespaces/"+g.ns+"/memories/pinned:pin", nil); r.Status != http.StatusOK {
		t.Fatalf("pin: %d %s", r.Status, r.Body)
	}
	got := g.c.Do(t, http.MethodGet, "/v1/namespaces/"+g.ns+"/memories/pinned", nil).JSON(t)
	if rels, _ := got["relations"].([]any); len(rels) != 1 || rels[0].(map[string]any)["cardinality"] != "multi" || got["pinned"] != true {
		t.Fatalf("the pinned head: %v", got)
	}
	if a := g.read("zoe", ""); objects(a, "visited") != "oslo" {
		t.Fatalf("zoe after the pin: %+v", a.Facts)
	}
}

// Erasing a user takes their part of the shared graph and nothing of anyone else's:
// the facts only their rows stated go, a close their write caused on another user's
// fact is undone, and a fact another user also states stays, held by that user alone.
func TestErasureOfAUserLeavesTheGraphAsIfTheyNeverWrote(t *testing.T) {
	g := newGraphNS(t, "append_only")
	g.set("office-bob", map[string]any{"value": "the office is in Porto", "user_id": bob, "relations": []any{rel("office", "lives_in", "Porto")}})
	g.set("team-alice", map[string]any{"value": "the team visited Lisbon", "user_id": alice, "relations": []any{rel("team", "visited", "Lisbon")}})
	g.set("team-bob", map[string]any{"value": "the team went to Lisbon", "user_id": bob, "relations": []any{rel("team", "visited", "Lisbon")}})
	g.set("office-alice", map[string]any{"value": "the office moved to Zanzibar", "user_id": alice,
		"relations": []any{rel("office", "lives_in", "Zanzibar")}, "entities": []any{"Zanzibar", "office"}})
	if a := g.read("office", ""); objects(a, "lives_in") != "zanzibar" {
		t.Fatalf("before the erasure: %+v", a.Facts)
	}

	view := g.c.Erase(t, map[string]any{"user_id": alice, "namespace": g.ns})
	completed(t, view)

	if a := g.read("office", "include_closed=true"); objects(a, "lives_in") != "porto" {
		t.Fatalf("after erasing alice, office lives_in %q; want Porto open again and no Zanzibar", objects(a, "lives_in"))
	}
	team := g.read("team", "")
	lisbon := fact(t, team, "visited", "lisbon", false)
	if !lisbon.Open || len(lisbon.Rows) == 0 {
		t.Fatalf("the fact bob also states: %+v", lisbon)
	}
	for _, r := range lisbon.Rows {
		if r.UserID != bob {
			t.Fatalf("a row of %s still holds Lisbon", r.UserID)
		}
	}
	if r := g.entity(g.c, "zanzibar", ""); r.Status != http.StatusNotFound {
		t.Fatalf("an entity only alice named: %d %s", r.Status, r.Body)
	}
	conn := env.CH(t)
	for _, q := range []string{
		`SELECT count() FROM loom.entity_triples WHERE org = 'acme' AND namespace = ? AND object = 'zanzibar'`,
		`SELECT count() FROM loom.entity_edges WHERE org = 'acme' AND namespace = ? AND (entity_a = 'zanzibar' OR entity_b = 'zanzibar')`,
		`SELECT count() FROM loom.entity_triple_rows WHERE org = 'acme' AND namespace = ? AND user_id = 'alice'`,
		`SELECT count() FROM loom.entities WHERE org = 'acme' AND namespace = ? AND user_id = 'alice'`,
	} {
		var n uint64
		if err := conn.QueryRow(conn.Ctx(t.Context()), q, g.ns).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s: %d rows left (%v)", q, n, err)
		}
	}

	// Bob held Lisbon alone once alice was erased, though her record opened it: his
	// erasure takes it, and the graph keeps nothing either of them stated.
	completed(t, g.c.Erase(t, map[string]any{"user_id": bob, "namespace": g.ns}))
	for _, q := range []string{
		`SELECT count() FROM loom.entity_triples WHERE org = 'acme' AND namespace = ?`,
		`SELECT count() FROM loom.entity_edges WHERE org = 'acme' AND namespace = ?`,
		`SELECT count() FROM loom.entity_triple_rows WHERE org = 'acme' AND namespace = ?`,
	} {
		var n uint64
		if err := conn.QueryRow(conn.Ctx(t.Context()), q, g.ns).Scan(&n); err != nil || n != 0 {
			t.Errorf("after erasing bob too, %s: %d rows left (%v)", q, n, err)
		}
	}
}
