package command

import (
	"testing"

	"github.com/loomplane/loom/events"
)

// The seed's own examples of a fact stated for an older value (memory-architecture,
// "Revisions"): "I live in London, not Paris" states (user, lives_in, london).
func TestARevisionKeepsAFactOnlyWhileItRestatesIt(t *testing.T) {
	london := events.Relation{Subject: "user", Predicate: "lives_in", Object: "london"}
	const old = "I live in London, not Paris"
	for _, c := range []struct {
		new  string
		want bool
	}{
		{"I live in London", true},
		{"I live in London, not Paris.", true},
		{"I live in London, near the river", false},
		{"I live in London and work at Acme", false},
		{"Still, I live in London", false},
		{"I live in London?", false},
		{"I lived in London", false},
		{"I live in Rome and visited London", false},
	} {
		if got := restates(old, c.new, london); got != c.want {
			t.Errorf("restates(%q, %q) = %v, want %v", old, c.new, got, c.want)
		}
	}
	// A comma, a dot or "and" inside a name of the triple is the name's.
	for _, c := range []struct {
		old, new string
		rel      events.Relation
		want     bool
	}{
		{"I live in Austin, Texas, near the lake", "I live in Austin, Texas", events.Relation{Subject: "user", Predicate: "lives_in", Object: "austin, texas"}, true},
		{"I work at Marks and Spencer, in the food hall", "I work at Marks and Spencer", events.Relation{Subject: "user", Predicate: "works_at", Object: "marks and spencer"}, true},
		{"I moved to St. Louis. I like it", "I moved to St. Louis.", events.Relation{Subject: "user", Predicate: "moved_to", Object: "st. louis"}, true},
		// A sentence without the relation's words counts only whole.
		{"Home is London, by the river", "Home is London", london, false},
		{"Home is London, by the river", "Home is London, by the river!", london, true},
		// A question states nothing; a sentence that does not name the object may go.
		{"Do I live in London?", "Do I live in London?", london, false},
		{"I live in London. The weather is grey", "I live in London", london, true},
	} {
		if got := restates(c.old, c.new, c.rel); got != c.want {
			t.Errorf("restates(%q, %q, %s) = %v, want %v", c.old, c.new, c.rel.Object, got, c.want)
		}
	}
}
