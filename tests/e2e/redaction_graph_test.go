package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/tests/testenv"
)

// A redacted version's relation stops answering graph reads: the fact it stated and
// the name it added leave the graph tables, while what the memory's other versions
// and other memories state stays, and a value the redacted version ended stays ended.
func TestRedactionTakesTheVersionsFactsFromTheGraph(t *testing.T) {
	g := newGraphNS(t, "append_only")
	word := fmt.Sprintf("wombat%06d", time.Now().UnixNano()%1_000_000)
	g.set("home", map[string]any{"value": "alice lives in oslo", "relations": []any{rel("alice", "lives_in", "oslo")}})
	secret := g.set("home", map[string]any{"value": "alice lives in " + word + " and visited paris",
		"relations": []any{rel("alice", "lives_in", word), rel("alice", "visited", "paris")}})
	g.set("home", map[string]any{"value": "alice lives in bergen and visited paris",
		"relations": []any{rel("alice", "lives_in", "bergen"), rel("alice", "visited", "paris")}})
	g.set("trip", map[string]any{"value": "alice visited rome", "relations": []any{rel("alice", "visited", "rome")}})
	pool, conn := env.PG(t), env.CH(t)
	testenv.WaitProjected(t, pool, "main", "acme", g.ns)
	if r := g.entity(g.c, word, ""); r.Status != http.StatusOK {
		t.Fatalf("before the redaction, the entity %s: %d %s", word, r.Status, r.Body)
	}

	r := g.c.Do(t, http.MethodPost, "/v1/namespaces/"+g.ns+"/memories/home:redact",
		[]byte(fmt.Sprintf(`{"version": %q}`, secret["version_text"])))
	if r.Status != http.StatusOK {
		t.Fatalf("redact: %d %s", r.Status, r.Body)
	}
	testenv.WaitProjected(t, pool, "main", "acme", g.ns)

	if r := g.entity(g.c, word, ""); r.Status != http.StatusNotFound {
		t.Errorf("after the redaction, the entity %s: %d %s", word, r.Status, r.Body)
	}
	for table, n := range testenv.GraphRows(t, conn, "acme", g.ns, word) {
		if n != 0 {
			t.Errorf("%s: %d rows still name the redacted value", table, n)
		}
	}
	a := g.read("alice", "include_closed=true")
	if got := objects(a, "lives_in"); strings.Contains(got, word) || !strings.Contains(got, "oslo(closed)") ||
		!containsOpen(got, "bergen") {
		t.Errorf("alice lives_in %s: want oslo closed (the redacted version ended it) and bergen open, no %s", got, word)
	}
	if got := objects(a, "visited"); !containsOpen(got, "paris") || !containsOpen(got, "rome") {
		t.Errorf("alice visited %s: want paris (the next version states it too) and rome (another memory's) open", got)
	}
	if r := g.entity(g.c, "paris", ""); r.Status != http.StatusOK {
		t.Errorf("the entity paris, which the next version names: %d %s", r.Status, r.Body)
	}
}

// containsOpen reports whether the objects list (objects) names object as open.
func containsOpen(list, object string) bool {
	for _, o := range strings.Split(list, ",") {
		if o == object {
			return true
		}
	}
	return false
}

// A redacted version takes from the graph the spellings and types only it declared of
// a name other rows still name, and nothing they declared: "BoB" as a person goes and
// another memory's "Bob", a friend, stays; Carol's type "person" goes and her spelling,
// which the other memory declared untyped, stays; Dana's "person", which the memory's
// next version declares again, stays.
func TestARedactionTakesTheSpellingsAndTypesOnlyItsVersionDeclared(t *testing.T) {
	g := newGraphNS(t, "append_only")
	typed := func(name, typ string) map[string]any { return map[string]any{"name": name, "type": typ} }
	g.set("friend", map[string]any{"value": "bob is a friend and carol too", "entities": []any{typed("Bob", "friend"), "Carol"}})
	secret := g.set("note", map[string]any{"value": "the note about bob, carol and dana",
		"entities": []any{typed("BoB", "person"), typed("Carol", "person"), typed("Dana", "person")}})
	g.set("note", map[string]any{"value": "the note about dana", "entities": []any{typed("Dana", "person")}})
	pool, conn := env.PG(t), env.CH(t)
	testenv.WaitProjected(t, pool, "main", "acme", g.ns)
	if a := g.read("bob", ""); a.Type != "person" || strings.Join(a.Aliases, ",") != "BoB,Bob" {
		t.Fatalf("before the redaction, bob is %q with aliases %v", a.Type, a.Aliases)
	}

	r := g.c.Do(t, http.MethodPost, "/v1/namespaces/"+g.ns+"/memories/note:redact",
		[]byte(fmt.Sprintf(`{"version": %q}`, secret["version_text"])))
	if r.Status != http.StatusOK {
		t.Fatalf("redact: %d %s", r.Status, r.Body)
	}
	testenv.WaitProjected(t, pool, "main", "acme", g.ns)

	for name, want := range map[string]string{"bob": "friend [Bob]", "carol": " [Carol]", "dana": "person [Dana]"} {
		if a := g.read(name, ""); fmt.Sprintf("%s %v", a.Type, a.Aliases) != want {
			t.Errorf("after the redaction, %s is %q with aliases %v; want %s", name, a.Type, a.Aliases, want)
		}
	}
	for table, n := range testenv.GraphRows(t, conn, "acme", g.ns, "BoB") {
		if n != 0 {
			t.Errorf("%s: %d rows still hold the redacted spelling", table, n)
		}
	}
	var typedCarol uint64
	if err := conn.QueryRow(context.Background(), `SELECT count() FROM loom.entities WHERE org = 'acme' AND namespace = ?
		AND name = 'carol' AND entity_type = 'person'`, g.ns).Scan(&typedCarol); err != nil || typedCarol != 0 {
		t.Errorf("loom.entities holds %d rows of carol as the redacted version's person (%v)", typedCarol, err)
	}
}

// A version projected before loom.entity_sightings existed (simulated by deleting the
// namespace's sightings) is recorded nowhere: its redaction takes the names only it
// named, as before. And a recorded version's spelling that such an older record
// declared too stays (the history keeps no type: "Bob" as a person), where the sightings
// alone would say only the redacted version declared it; a spelling no older record
// declared goes ("CY" as a person), though an older record named the name ("Cy").
func TestARedactionOfVersionsOlderThanTheSightingsTakesNamesAsBefore(t *testing.T) {
	g := newGraphNS(t, "append_only")
	typed := func(name, typ string) map[string]any { return map[string]any{"name": name, "type": typ} }
	g.set("friend", map[string]any{"value": "bob is a person, cy is not", "entities": []any{typed("Bob", "person"), "Cy"}})
	older := g.set("note", map[string]any{"value": "eve wrote the note", "entities": []any{typed("Eve", "person")}})
	pool, conn := env.PG(t), env.CH(t)
	testenv.WaitProjected(t, pool, "main", "acme", g.ns)
	ctx := context.Background()
	if err := conn.Exec(ctx, "ALTER TABLE loom.entity_sightings DELETE WHERE org = 'acme' AND namespace = ?", g.ns); err != nil {
		t.Fatal(err)
	}
	sightings := func() uint64 {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM loom.entity_sightings WHERE org = 'acme' AND namespace = ?", g.ns).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	testenv.Eventually(t, time.Minute, "the namespace's sightings to go", func() bool { return sightings() == 0 })
	recorded := g.set("note", map[string]any{"value": "bob, cy and zoe wrote the note",
		"entities": []any{typed("Bob", "person"), typed("CY", "person"), "Zoe"}})
	g.set("note", map[string]any{"value": "nobody wrote the note"}) // the live head, which a redaction leaves
	testenv.WaitProjected(t, pool, "main", "acme", g.ns)
	if n := sightings(); n != 3 {
		t.Fatalf("the recorded version left %d sightings, want 3", n)
	}

	for _, v := range []map[string]any{older, recorded} {
		r := g.c.Do(t, http.MethodPost, "/v1/namespaces/"+g.ns+"/memories/note:redact", []byte(fmt.Sprintf(`{"version": %q}`, v["version_text"])))
		if r.Status != http.StatusOK {
			t.Fatalf("redact: %d %s", r.Status, r.Body)
		}
	}
	testenv.WaitProjected(t, pool, "main", "acme", g.ns)

	for _, name := range []string{"eve", "zoe"} {
		if r := g.entity(g.c, name, ""); r.Status != http.StatusNotFound {
			t.Errorf("after the redactions, the entity %s only the note named: %d %s", name, r.Status, r.Body)
		}
	}
	for name, want := range map[string]string{"bob": "person [Bob]", "cy": " [Cy]"} {
		if a := g.read(name, ""); fmt.Sprintf("%s %v", a.Type, a.Aliases) != want {
			t.Errorf("after the redactions, %s is %q with aliases %v; want the other memory's %s", name, a.Type, a.Aliases, want)
		}
	}
	if n := sightings(); n != 0 {
		t.Errorf("%d sightings of the redacted version are left", n)
	}
}
