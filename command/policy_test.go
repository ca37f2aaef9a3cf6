package command

import (
	"testing"

	"github.com/loomplane/loom/events"
)

func TestNamespaceConfigDeclaresRelationCardinalities(t *testing.T) {
	c := NamespaceConfig{Relations: map[string]string{"Lives In": "single", "visited": "multi"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Relations["lives_in"] != events.CardinalitySingle || c.cardinality("lives_in") != events.CardinalitySingle {
		t.Fatalf("relations %v: the predicate is stored in its canonical form", c.Relations)
	}
	if c.cardinality("works_at") != events.CardinalityMulti {
		t.Fatal("an undeclared predicate must be multi")
	}
	// A state verb's tense names one relation: lived_in and live_in are lives_in's.
	if c.cardinality("lived_in") != events.CardinalitySingle || c.cardinality("live_in") != events.CardinalitySingle {
		t.Fatal("lived_in and live_in must read lives_in's cardinality")
	}
	for _, rel := range []map[string]string{
		{"lives_in": "one"},
		{"  ": "single"},
		{"lives in": "single", "Lives_In": "multi"},
		{"lives_in": "single", "lived_in": "multi"}, // one relation, two cardinalities
	} {
		c := NamespaceConfig{Relations: rel}
		if err := c.Validate(); fieldOf(err) == "" || fieldOf(err)[:10] != "relations." {
			t.Fatalf("%v: %v, want a 422 naming relations.<predicate>", rel, err)
		}
	}
}
