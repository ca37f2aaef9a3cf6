package graph

import (
	"testing"
	"time"

	"github.com/loomplane/loom/events"
)

func envelope(typ events.Type, mod func(*events.Revision)) *events.Envelope {
	rev := &events.Revision{Op: "memory.set", MemoryID: "m1", UserID: "u1", Status: "active", Sensitivity: "normal", ContentSHA256: "sha"}
	if mod != nil {
		mod(rev)
	}
	return &events.Envelope{Type: typ, Seq: 7, CommittedAt: day0.Add(9 * time.Hour), Revision: rev}
}

var content = &events.Content{MemoryKey: "home", Entities: []string{"User", "Acme Corp"},
	EntityTypes: map[string]string{"Acme Corp": "company"},
	Relations: []events.Relation{{Subject: "user", Predicate: "Lives In", Object: "London", Cardinality: "single"},
		{Subject: "USER", Predicate: "lives_in", Object: "london"}}}

func TestRecordOfReadsTheRowsHolderRules(t *testing.T) {
	r := RecordOf(envelope(events.TypeWritten, nil), content)
	if !r.HoldsFacts || !r.HoldsEdges || !r.Closes || r.Restore || len(r.Statements) != 1 {
		t.Fatalf("a live row: %+v", r)
	}
	if st := r.Statements[0]; st.Fact != (Fact{"user", "lives_in", "london"}) || st.Cardinality != events.CardinalitySingle {
		t.Fatalf("statement %+v: canonical, once", st)
	}
	if len(r.Entities) != 3 || r.Entities[1] != (Entity{Name: "acme corp", Alias: "Acme Corp", Type: "company"}) || r.Entities[2].Name != "london" {
		t.Fatalf("entities %+v: declared ones first, then the relations'", r.Entities)
	}
	past := day0
	for name, c := range map[string]struct {
		typ                       events.Type
		mod                       func(*events.Revision)
		facts, edges, closes, res bool
	}{
		"deleted":    {events.TypeTombstoned, func(v *events.Revision) { v.Tombstone = true }, false, false, false, false},
		"expired":    {events.TypeTombstoned, func(v *events.Revision) { v.Tombstone, v.Op = true, OpExpire }, false, false, true, false},
		"valid_to":   {events.TypeRevised, func(v *events.Revision) { v.ValidTo = &past }, false, false, true, false},
		"superseded": {events.TypeStatusChanged, func(v *events.Revision) { v.Status = "superseded" }, false, false, true, false},
		"proposal":   {events.TypeWritten, func(v *events.Revision) { v.Status = "proposed" }, false, true, true, false},
		"rejected":   {events.TypeStatusChanged, func(v *events.Revision) { v.Status = "rejected" }, true, true, true, false},
		"restored":   {events.TypeRestored, nil, true, true, true, true},
	} {
		r := RecordOf(envelope(c.typ, c.mod), content)
		if r.HoldsFacts != c.facts || r.HoldsEdges != c.edges || r.Closes != c.closes || r.Restore != c.res {
			t.Errorf("%s: %+v", name, r)
		}
	}
	high := RecordOf(envelope(events.TypeWritten, func(v *events.Revision) { v.Sensitivity = "high" }), content)
	if high.HoldsFacts || !high.HoldsEdges || len(high.Statements) != 0 || len(high.Entities) != 2 {
		t.Fatalf("a high row holds its declared entities' edges only: %+v", high)
	}
}
