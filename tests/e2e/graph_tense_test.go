package e2e

import (
	"testing"
	"time"
)

// "Alice lived in Paris and now lives in Lisbon", in one write, whichever the writer
// states first: the entity read answers Lisbon as Alice's current lives_in and Paris
// as the older value, closed when Lisbon starts (memory-architecture "Which value is
// newer").
func TestGraphPastFormIsTheOlderValueWithinOneWrite(t *testing.T) {
	g := newGraphNS(t, "append_only")
	g.set("alice-a", map[string]any{"value": "Alice lived in Paris and now lives in Lisbon",
		"relations": []any{rel("Alice", "lived in", "Paris"), rel("Alice", "lives_in", "Lisbon")}})
	g.set("bob-a", map[string]any{"value": "Bob lives in Lisbon; he lived in Paris",
		"relations": []any{rel("Bob", "lives_in", "Lisbon"), rel("Bob", "lived_in", "Paris")}})
	for _, who := range []string{"alice", "bob"} {
		if got := objects(g.read(who, ""), "lives_in"); got != "lisbon" {
			t.Fatalf("%s's current lives_in: %q, want lisbon", who, got)
		}
		a := g.read(who, "include_closed=true")
		paris, lisbon := fact(t, a, "lives_in", "paris", false), fact(t, a, "lives_in", "lisbon", false)
		if paris.Open || paris.ValidTo == nil || !paris.ValidTo.Equal(lisbon.ValidFrom) || !lisbon.Open {
			t.Fatalf("%s: Paris %+v closes when Lisbon %+v starts", who, paris, lisbon)
		}
	}

	// "user lived_in london" and "user live_in paris" from two weeks back, in one
	// write: London closes when Paris starts, and Paris stays current.
	from := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -14)
	g.set("carol", map[string]any{"value": "Carol lived in London; she has lived in Paris for two weeks",
		"relations": []any{rel("Carol", "lived_in", "London"), rel("Carol", "live_in", "Paris", &from)}})
	a := g.read("carol", "include_closed=true")
	london, paris := fact(t, a, "lives_in", "london", false), fact(t, a, "lives_in", "paris", false)
	if london.Open || london.ValidTo == nil || !london.ValidTo.Equal(from) || !paris.Open || !paris.ValidFrom.Equal(from) {
		t.Fatalf("London %+v closes on %s, when Paris %+v starts", london, from, paris)
	}
}
