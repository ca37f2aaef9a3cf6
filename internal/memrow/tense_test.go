package memrow

import "testing"

// A predicate's tense folds into the relation it names; only a state's past form is
// past, and an event's verb or an unknown one is its own relation.
func TestRelationFoldsAStatesTense(t *testing.T) {
	for _, c := range []struct {
		predicate, key string
		past           bool
	}{
		{"lived_in", "lives_in", true},
		{"live_in", "lives_in", false},
		{"lives_in", "lives_in", false},
		{"living_in", "lives_in", false},
		{"worked_at", "works_at", true},
		{"works_at", "works_at", false},
		{"was_based_in", "is_based_in", true},
		{"is_based_in", "is_based_in", false},
		{"were_married_to", "is_married_to", true},
		{"used_to_live_in", "lives_in", true},
		{"used_to_smoke", "used_to_smoke", false},
		{"taught_at", "teaches_at", true},
		{"had", "has", true},
		{"studied", "studies", true},
		{"moved_to", "moved_to", false}, // an event: when it happened, not that it stopped
		{"joined", "joined", false},     // "worked at Acme before joining Globex"
		{"attended", "attended", false}, // mostly an event's
		{"led_to", "led_to", false},
		{"visited", "visited", false},
		{"likes", "likes", false},
	} {
		key, past := Relation(c.predicate)
		if key != c.key || past != c.past {
			t.Errorf("Relation(%q) = %q, %v; want %q, %v", c.predicate, key, past, c.key, c.past)
		}
	}
	if k := RelationKey("Lived In"); k != "lives_in" {
		t.Errorf("RelationKey(Lived In) = %q", k)
	}
}
