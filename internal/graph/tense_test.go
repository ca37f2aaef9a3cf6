package graph

import (
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/events"
)

// pastWrite is the record of one write of row id at at, stating rels as a writer or
// the extractor named them (their tense unfolded).
func pastWrite(id string, at time.Time, rels ...events.Relation) Record {
	env := envelope(events.TypeWritten, func(v *events.Revision) { v.MemoryID = id })
	env.CommittedAt = at
	for i := range rels {
		rels[i].Cardinality = events.CardinalitySingle
	}
	return RecordOf(env, &events.Content{MemoryKey: id, Relations: rels})
}

func relation(s, p, o string, from *time.Time) events.Relation {
	return events.Relation{Subject: s, Predicate: p, Object: o, ValidFrom: from}
}

// current names the open values of the fold, and closed each closed one with its end.
func current(tb *tables) (open []string, closed map[string]time.Time) {
	closed = map[string]time.Time{}
	for _, v := range latest(tb.obs, ^uint64(0), func(o Observation) string { return o.Object }, func(Observation) bool { return true }) {
		if v.InvalidAt == nil {
			open = append(open, v.Predicate+" "+v.Object)
		} else {
			closed[v.Object] = *v.ValidTo
		}
	}
	return open, closed
}

// The seed's examples (memory-architecture "Which value is newer"): within one write,
// an undated value whose own verb is a past form of a state is older than another
// value of its relation, whichever is stated first; statement order alone moves
// nothing, and only the triple's own verb counts.
func TestPastFormIsTheOlderValueWithinOneWrite(t *testing.T) {
	oct1 := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	oct15 := time.Date(2026, 10, 15, 9, 30, 0, 0, time.UTC)
	y2019 := time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		rels     []events.Relation
		open     string
		closedAt map[string]time.Time // a closed value's end; zero: when the write was seen
	}{
		{"user lived_in london, user live_in paris from Oct 1, written Oct 15",
			[]events.Relation{relation("user", "lived_in", "london", nil), relation("user", "live_in", "paris", &oct1)},
			"lives_in paris", map[string]time.Time{"london": oct1}},
		{"the same, Paris stated first",
			[]events.Relation{relation("user", "live_in", "paris", &oct1), relation("user", "lived_in", "london", nil)},
			"lives_in paris", map[string]time.Time{"london": oct1}},
		{"Alice lived in Paris and now lives in Lisbon",
			[]events.Relation{relation("alice", "lived_in", "paris", nil), relation("alice", "lives_in", "lisbon", nil)},
			"lives_in lisbon", map[string]time.Time{"paris": {}}},
		{"Alice lives in Lisbon; she lived in Paris",
			[]events.Relation{relation("alice", "lives_in", "lisbon", nil), relation("alice", "lived_in", "paris", nil)},
			"lives_in lisbon", map[string]time.Time{"paris": {}}},
		{"I live in Paris, next to I moved to London in 2019",
			[]events.Relation{relation("user", "lives_in", "paris", nil), relation("user", "lives_in", "london", &y2019)},
			"lives_in paris", map[string]time.Time{"london": {}}},
		{"I moved to London in 2019, next to I live in Paris",
			[]events.Relation{relation("user", "lives_in", "london", &y2019), relation("user", "lives_in", "paris", nil)},
			"lives_in paris", map[string]time.Time{"london": {}}},
		{"worked at Acme before joining Globex",
			[]events.Relation{relation("user", "worked_at", "acme", nil), relation("user", "works_at", "globex", nil)},
			"works_at globex", map[string]time.Time{"acme": {}}},
		{"joined Globex after working at Acme: Globex stated first",
			[]events.Relation{relation("user", "works_at", "globex", nil), relation("user", "worked_at", "acme", nil)},
			"works_at globex", map[string]time.Time{"acme": {}}},
		{"two past values keep the statement order",
			[]events.Relation{relation("user", "lived_in", "rome", nil), relation("user", "lived_in", "paris", nil)},
			"lives_in paris", map[string]time.Time{"rome": {}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := pastWrite("m1", oct15, c.rels...)
			tb := fold([]Record{r}, 1)
			open, closed := current(tb)
			if strings.Join(open, ",") != c.open || len(closed) != len(c.closedAt) {
				t.Fatalf("open %v, closed %v; want %s open\n%s", open, closed, c.open, tb.dump())
			}
			for obj, end := range c.closedAt {
				got, ok := closed[obj]
				if end.IsZero() {
					end = oct15 // the newer undated value starts when the write was seen
				}
				if !ok || !got.Equal(end) {
					t.Fatalf("%s closed at %v, want %v\n%s", obj, got, end, tb.dump())
				}
			}
		})
	}
}

// "I lived in Rome. I now live in Berlin." retired and undone: Berlin is current,
// whichever the row stated first.
func TestUndoOfAPastAndAPresentValueKeepsThePresentCurrent(t *testing.T) {
	for _, rels := range [][]events.Relation{
		{relation("user", "lived_in", "rome", nil), relation("user", "live_in", "berlin", nil)},
		{relation("user", "live_in", "berlin", nil), relation("user", "lived_in", "rome", nil)},
	} {
		at := time.Date(2026, 10, 15, 9, 30, 0, 0, time.UTC)
		w := &writer{at: at}
		row := pastWrite("m1", at, rels...)
		w.next(row)
		gone := row
		gone.HoldsFacts, gone.HoldsEdges = false, false
		w.next(gone)
		row.Restore = true
		w.next(row)
		open, _ := current(fold(w.recs, 1))
		if strings.Join(open, ",") != "lives_in berlin" {
			t.Fatalf("stated %v, undone: open %v, want Berlin alone", rels, open)
		}
	}
}
