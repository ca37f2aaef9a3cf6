package graph

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/events"
)

// tables stands in for the ClickHouse graph tables: every version a fold wrote, keyed
// as the tables are (the natural key and the seq), so a version written twice
// collapses. load reads a batch's State from it as of a seq, as the projector does.
type tables struct {
	obs    map[string]Versioned[Observation]
	links  map[string]Versioned[TripleLink]
	edges  map[string]Versioned[Edge]
	elinks map[string]Versioned[EdgeLink]
	sights map[string]Versioned[Sighting]
}

func newTables() *tables {
	return &tables{obs: map[string]Versioned[Observation]{}, links: map[string]Versioned[TripleLink]{},
		edges: map[string]Versioned[Edge]{}, elinks: map[string]Versioned[EdgeLink]{}, sights: map[string]Versioned[Sighting]{}}
}

func (t *tables) write(rows *Rows) {
	for _, v := range rows.Observations {
		t.obs[fmt.Sprint(v.Row.ObsKey, v.Seq)] = v
	}
	for _, v := range rows.TripleLinks {
		t.links[fmt.Sprint(v.Row.Fact, v.Row.Row.MemoryID, v.Seq)] = v
	}
	for _, v := range rows.Edges {
		t.edges[fmt.Sprint(v.Row.Pair, v.Row.OpenedSeq, v.Seq)] = v
	}
	for _, v := range rows.EdgeLinks {
		t.elinks[fmt.Sprint(v.Row.Pair, v.Row.Row.MemoryID, v.Seq)] = v
	}
	for _, v := range rows.Sightings {
		// entities replace by seq on their key: the latest sighting stays.
		k := fmt.Sprint(v.Row)
		if cur, ok := t.sights[k]; !ok || v.Seq >= cur.Seq {
			t.sights[k] = v
		}
	}
}

// latest keeps, per natural key, the version of the highest seq below cutoff.
func latest[T any](m map[string]Versioned[T], cutoff uint64, key func(T) string, keep func(T) bool) []T {
	best := map[string]Versioned[T]{}
	for _, v := range m {
		if v.Seq >= cutoff || !keep(v.Row) {
			continue
		}
		k := key(v.Row)
		if cur, ok := best[k]; !ok || v.Seq > cur.Seq {
			best[k] = v
		}
	}
	var out []T
	for _, v := range best {
		out = append(out, v.Row)
	}
	return out
}

func (t *tables) load(recs []Record) *State {
	st := NewState()
	cutoff := recs[0].Seq
	ids := map[string]bool{}
	for _, id := range RowIDs(recs) {
		ids[id] = true
	}
	for _, l := range latest(t.links, cutoff, func(l TripleLink) string { return fmt.Sprint(l.Fact, l.Row.MemoryID) },
		func(l TripleLink) bool { return ids[l.Row.MemoryID] }) {
		st.LoadTripleLink(l)
	}
	for _, l := range latest(t.elinks, cutoff, func(l EdgeLink) string { return fmt.Sprint(l.Pair, l.Row.MemoryID) },
		func(l EdgeLink) bool { return ids[l.Row.MemoryID] }) {
		st.LoadEdgeLink(l)
	}
	relations, pairs := st.Touched(recs)
	rel := map[group]bool{}
	for _, r := range relations {
		rel[group{r[0], r[1]}] = true
	}
	ps := map[Pair]bool{}
	for _, p := range pairs {
		ps[p] = true
	}
	for _, o := range latest(t.obs, cutoff, func(o Observation) string { return fmt.Sprint(o.ObsKey) },
		func(o Observation) bool { return rel[o.group()] }) {
		st.LoadObservation(o)
	}
	for _, l := range latest(t.links, cutoff, func(l TripleLink) string { return fmt.Sprint(l.Fact, l.Row.MemoryID) },
		func(l TripleLink) bool { return rel[l.group()] }) {
		st.LoadTripleLink(l)
	}
	for _, e := range latest(t.edges, cutoff, func(e Edge) string { return fmt.Sprint(e.Pair, e.OpenedSeq) },
		func(e Edge) bool { return ps[e.Pair] }) {
		st.LoadEdge(e)
	}
	for _, l := range latest(t.elinks, cutoff, func(l EdgeLink) string { return fmt.Sprint(l.Pair, l.Row.MemoryID) },
		func(l EdgeLink) bool { return ps[l.Pair] }) {
		st.LoadEdgeLink(l)
	}
	return st
}

// fold projects recs in batches of size n, loading each batch's state from the tables.
func fold(recs []Record, n int) *tables {
	t := newTables()
	for i := 0; i < len(recs); i += n {
		batch := recs[i:min(i+n, len(recs))]
		st := t.load(batch)
		var rows Rows
		for _, r := range batch {
			st.Apply(r, &rows)
		}
		t.write(&rows)
	}
	return t
}

func (t *tables) dump() string {
	var lines []string
	for k, v := range t.obs {
		lines = append(lines, fmt.Sprintf("obs %s %+v %s %s %s", k, v.Row, str(v.Row.ValidTo), str(v.Row.InvalidAt), v.At))
	}
	for k, v := range t.links {
		lines = append(lines, fmt.Sprintf("link %s %+v %s %s", k, v.Row, str(v.Row.StatedFrom), str(v.Row.StatedTo)))
	}
	for k, v := range t.edges {
		lines = append(lines, fmt.Sprintf("edge %s %+v %s", k, v.Row, str(v.Row.ValidTo)))
	}
	for k, v := range t.elinks {
		lines = append(lines, fmt.Sprintf("elink %s %+v", k, v.Row))
	}
	for k, v := range t.sights {
		lines = append(lines, fmt.Sprintf("sight %s %d", k, v.Seq))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func str(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}

// writer builds the records of one namespace, one seq at a time.
type writer struct {
	seq  uint64
	at   time.Time
	recs []Record
}

func (w *writer) next(r Record) Record {
	w.seq++
	w.at = w.at.Add(time.Minute)
	r.Seq, r.At = w.seq, w.at
	if r.Row.ContentSHA256 == "" {
		r.Row.ContentSHA256 = "sha-" + r.Row.MemoryID
	}
	w.recs = append(w.recs, r)
	return r
}

// live is a record of a live, active row stating sts.
func live(id string, sts ...Statement) Record {
	r := Record{Row: RowRef{MemoryID: id, UserID: "u"}, HoldsFacts: true, HoldsEdges: true, Closes: true, Statements: sts}
	for _, st := range sts {
		r.Entities = appendEntity(appendEntity(r.Entities, st.Subject), st.Object)
	}
	return r
}

func appendEntity(es []Entity, name string) []Entity {
	for _, e := range es {
		if e.Name == name {
			return es
		}
	}
	return append(es, Entity{Name: name, Alias: name})
}

func single(s, p, o string) Statement {
	return Statement{Fact: Fact{s, p, o}, Cardinality: events.CardinalitySingle}
}

func multi(s, p, o string) Statement {
	return Statement{Fact: Fact{s, p, o}, Cardinality: events.CardinalityMulti}
}

// facts answers the current version of every observation of a relation's object.
func (t *tables) facts(object string) []Observation {
	best := latest(t.obs, ^uint64(0), func(o Observation) string { return fmt.Sprint(o.ObsKey) },
		func(o Observation) bool { return o.Object == object })
	sort.Slice(best, func(i, j int) bool { return best[i].ObservedSeq < best[j].ObservedSeq })
	return best
}

func TestLondonClosesWhenParisStarts(t *testing.T) {
	w := &writer{at: day0}
	w.next(live("a", single("user", "lives_in", "london")))
	paris := w.next(live("b", single("user", "lives_in", "paris")))
	tb := fold(w.recs, 1)
	london := tb.facts("london")
	if len(london) != 1 || london[0].InvalidAt == nil || !london[0].ValidTo.Equal(paris.At.Truncate(time.Second)) {
		t.Fatalf("london %+v: closed when Paris starts", london)
	}
	if p := tb.facts("paris"); len(p) != 1 || p[0].InvalidAt != nil || p[0].ValidTo != nil {
		t.Fatalf("paris %+v: open", p)
	}
}

func TestRetirementClosesTheLosersFactsTheWinnerDoesNotState(t *testing.T) {
	w := &writer{at: day0}
	loser := live("a", multi("user", "visited", "rome"), multi("user", "likes", "tea"))
	w.next(loser)
	w.next(live("b", multi("user", "likes", "tea"))) // the winner states tea only
	retired := loser
	retired.HoldsFacts, retired.HoldsEdges = false, false // superseded
	w.next(retired)
	tb := fold(w.recs, 2)
	if rome := tb.facts("rome"); len(rome) != 1 || rome[0].InvalidAt == nil {
		t.Fatalf("rome %+v: the loser's fact closes", rome)
	}
	if tea := tb.facts("tea"); len(tea) != 1 || tea[0].InvalidAt != nil {
		t.Fatalf("tea %+v: the winner still states it", tea)
	}
	// Undo: the restored row's fact is seen again from the restore.
	restored := loser
	restored.Restore = true
	undo := w.next(restored)
	tb = fold(w.recs, 1)
	rome := tb.facts("rome")
	if len(rome) != 2 || rome[1].InvalidAt != nil || !rome[1].Restored || !rome[1].ValidFrom.Equal(undo.At.Truncate(time.Second)) {
		t.Fatalf("rome %+v: a marker from the restore on", rome)
	}
}

func TestUndoMakesTheRestoredValueCurrent(t *testing.T) {
	w := &writer{at: day0}
	a := live("a", single("user", "lives_in", "london"))
	w.next(a)
	w.next(live("b", single("user", "lives_in", "paris")))
	gone := a
	gone.HoldsFacts, gone.HoldsEdges = false, false
	w.next(gone)
	a.Restore = true
	undo := w.next(a)
	tb := fold(w.recs, 3)
	paris := tb.facts("paris")
	if len(paris) != 1 || paris[0].InvalidAt == nil || !paris[0].ValidTo.Equal(undo.At.Truncate(time.Second)) {
		t.Fatalf("paris %+v: closes at the Undo", paris)
	}
	if london := tb.facts("london"); len(london) != 2 || london[1].InvalidAt != nil {
		t.Fatalf("london %+v: open again from the Undo", london)
	}
}

// London closed by Paris; Paris's row revised away: London is stated again from then
// on (a fallback), never neither.
func TestOneValueStaysCurrentWhenTheNewerGoesAway(t *testing.T) {
	w := &writer{at: day0}
	w.next(live("a", single("user", "lives_in", "london")))
	w.next(live("b", single("user", "lives_in", "paris")))
	gone := w.next(live("b"))
	tb := fold(w.recs, 2)
	if p := tb.facts("paris"); len(p) != 1 || p[0].InvalidAt == nil {
		t.Fatalf("paris %+v: closed once its row no longer says it", p)
	}
	london := tb.facts("london")
	if len(london) != 2 || london[0].InvalidAt == nil || london[1].InvalidAt != nil || !london[1].Fallback ||
		!london[1].ValidFrom.Equal(gone.At.Truncate(time.Second)) {
		t.Fatalf("london %+v: closed by Paris, then current again from the revision", london)
	}
	// The row holding London now holds the fallback: dropping it closes London.
	w.next(live("a"))
	if london := fold(w.recs, 1).facts("london"); london[1].InvalidAt == nil {
		t.Fatalf("london %+v: closed once no row holds it", london)
	}
}

func TestRevisionClosesOnlyWhatNoRowHolds(t *testing.T) {
	w := &writer{at: day0}
	w.next(live("a", multi("user", "speaks", "french")))
	w.next(live("c", multi("user", "speaks", "french")))
	w.next(live("a")) // a revised: states nothing now
	tb := fold(w.recs, 1)
	if f := tb.facts("french"); len(f) != 1 || f[0].InvalidAt != nil {
		t.Fatalf("french %+v: c still holds it", f)
	}
	w.next(live("c"))
	tb = fold(w.recs, 1)
	if f := tb.facts("french"); len(f) != 1 || f[0].InvalidAt == nil {
		t.Fatalf("french %+v: closed once no row holds it", f)
	}
}

func TestDeleteClosesNothingAndHighRowsHoldOnlyDeclaredEdges(t *testing.T) {
	w := &writer{at: day0}
	a := live("a", multi("user", "owns", "car"))
	w.next(a)
	del := a
	del.HoldsFacts, del.HoldsEdges, del.Closes = false, false, false
	w.next(del)
	high := Record{Row: RowRef{MemoryID: "h", UserID: "u"}, HoldsEdges: true, Closes: true,
		Entities: []Entity{{Name: "alice", Alias: "Alice"}, {Name: "bob", Alias: "Bob"}}}
	w.next(high)
	tb := fold(w.recs, 1)
	if f := tb.facts("car"); len(f) != 1 || f[0].InvalidAt != nil {
		t.Fatalf("car %+v: a delete closes none of its row's facts", f)
	}
	var pairs []string
	for _, e := range latest(tb.edges, ^uint64(0), func(e Edge) string { return fmt.Sprint(e.Pair) }, func(Edge) bool { return true }) {
		pairs = append(pairs, e.A+"+"+e.B)
	}
	sort.Strings(pairs)
	if strings.Join(pairs, ",") != "alice+bob,car+user" {
		t.Fatalf("edges %v", pairs)
	}
}

// The same records give the same tables whatever the batches they are folded in.
func TestFoldIsIndependentOfBatchBoundaries(t *testing.T) {
	rng := rand.New(rand.NewSource(42))
	objects := []string{"london", "paris", "berlin", "rome"}
	preds := []Statement{single("user", "lives_in", ""), multi("user", "visited", ""), single("acme", "hq_in", "")}
	rows := []string{"a", "b", "c", "d", "e", "f"}
	w := &writer{at: day0}
	last := map[string]Record{}
	for i := 0; i < 600; i++ {
		id := rows[rng.Intn(len(rows))]
		var r Record
		switch k := rng.Intn(10); {
		case k < 5 || last[id].Row.MemoryID == "":
			var sts []Statement
			seen := map[Fact]bool{}
			for j := 0; j < rng.Intn(4); j++ {
				st := preds[rng.Intn(len(preds))]
				st.Object = objects[rng.Intn(len(objects))]
				if seen[st.Fact] {
					continue
				}
				seen[st.Fact] = true
				if rng.Intn(4) == 0 {
					from := w.at.Add(time.Duration(rng.Intn(72)-24) * time.Hour).Truncate(time.Second)
					st.From = &from
				}
				if rng.Intn(5) == 0 {
					to := w.at.Add(time.Duration(24+rng.Intn(72)) * time.Hour).Truncate(time.Second)
					st.To = &to
				}
				sts = append(sts, st)
			}
			r = live(id, sts...)
			if rng.Intn(8) == 0 { // high: declared entities' edges only
				r.HoldsFacts, r.Statements = false, nil
			}
			r.Row.ContentSHA256 = fmt.Sprintf("sha-%d", i)
		case k < 7: // a copy: retired, or deleted
			r = last[id]
			r.HoldsFacts, r.HoldsEdges, r.Closes, r.Restore = false, false, rng.Intn(2) == 0, false
		case k < 9: // an Undo
			r = last[id]
			r.HoldsFacts, r.HoldsEdges, r.Closes, r.Restore = len(r.Statements) > 0, true, true, true
		default: // a pin: the same row again
			r = last[id]
			r.Restore = false
		}
		last[id] = w.next(r)
	}
	want := fold(w.recs, len(w.recs)).dump()
	for _, n := range []int{1, 2, 7, 50} {
		if got := fold(w.recs, n).dump(); got != want {
			t.Fatalf("batches of %d fold to other tables than one batch:\n%s", n, firstDiff(got, want))
		}
	}
	// A replay over the tables already written writes exactly the same versions.
	tb := fold(w.recs, 13)
	before := tb.dump()
	for i := 0; i < len(w.recs); i += 29 {
		batch := w.recs[i:min(i+29, len(w.recs))]
		st := tb.load(batch)
		var rows Rows
		for _, r := range batch {
			st.Apply(r, &rows)
		}
		tb.write(&rows)
	}
	if after := tb.dump(); after != before {
		t.Fatalf("a replay changed the tables:\n%s", firstDiff(after, before))
	}
}

func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(la) && i < len(lb); i++ {
		if la[i] != lb[i] {
			return "got  " + la[i] + "\nwant " + lb[i]
		}
	}
	return fmt.Sprintf("%d lines, want %d", len(la), len(lb))
}
