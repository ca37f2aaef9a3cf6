package e2e

import (
	"sort"
	"testing"

	"github.com/loomplane/loom/internal/erasure"
	"github.com/loomplane/loom/tests/testenv"
)

// Every table either store holds is in the erasure registry, classified as counted by
// the residue census, cleared by a step only, or holding no memory content (with the
// reason): a table added without a decision fails here. A registry entry for a table
// that no longer exists fails too. A copy of a projection table a rebuild made
// (loom.memory__g2) is classified as the table it copies.
func TestEveryTableIsClassified(t *testing.T) {
	have := map[string]bool{}
	for _, k := range testenv.PGStrings(t, env.PG(t), `SELECT 'pg:' || table_schema || '.' || table_name
		FROM information_schema.tables WHERE table_schema = 'loom' AND table_type = 'BASE TABLE'`) {
		have[k] = true
	}
	for _, k := range testenv.CHStrings(t, env.CH(t), `SELECT concat('ch:', database, '.', name) FROM system.tables WHERE database = 'loom'`) {
		have[k] = true
	}
	if len(have) < 10 {
		t.Fatalf("found only %d tables: %v", len(have), have)
	}
	listed := map[string]erasure.Table{}
	for _, tb := range erasure.Tables() {
		if _, dup := listed[tb.Key()]; dup {
			t.Errorf("%s is listed twice", tb.Key())
		}
		listed[tb.Key()] = tb
		switch {
		case !have[tb.Key()]:
			t.Errorf("the registry lists %s, which neither store holds", tb.Key())
		case tb.Class != erasure.Counted && tb.Class != erasure.StepOnly && tb.Class != erasure.NoMemoryContent:
			t.Errorf("%s has no class", tb.Key())
		case tb.Why == "":
			t.Errorf("%s does not say why it is %s", tb.Key(), tb.Class)
		case tb.Store == erasure.Postgres && tb.Class == erasure.Counted && tb.Scope == "":
			t.Errorf("%s is counted but has no scope predicate", tb.Key())
		}
	}
	var missing []string
	for k := range have {
		if _, ok := erasure.Classify(k); !ok {
			missing = append(missing, k)
		}
	}
	for k, want := range map[string]string{"ch:loom.memory__g3": "ch:loom.memory", "ch:loom.entity_edge_rows__g12": "ch:loom.entity_edge_rows"} {
		if tb, ok := erasure.Classify(k); !ok || tb.Key() != want || tb.Class != erasure.Counted {
			t.Errorf("Classify(%s) = %+v, %t; want the entry of %s", k, tb, ok, want)
		}
	}
	for _, k := range []string{"ch:loom.ch_migrations__g2", "pg:loom.memory_current__g2", "ch:loom.unknown"} {
		if tb, ok := erasure.Classify(k); ok {
			t.Errorf("Classify(%s) = %+v; want no entry", k, tb)
		}
	}
	sort.Strings(missing)
	for _, k := range missing {
		t.Errorf("%s is not in the erasure registry (internal/erasure/registry.go): classify it as counted, step-only or holding no memory content", k)
	}
}
