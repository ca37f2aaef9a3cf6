package graph

import (
	"time"

	"github.com/loomplane/loom/events"
)

// State is the part of one namespace's graph a batch reads, as of just before the
// batch's first record: the links of the rows it writes, the active observations of
// the relations it touches with the rows holding each, and the edges of the pairs it
// touches with the rows that name them. The projector loads it (Load*) and Apply
// keeps it current as it folds the batch's records.
type State struct {
	rowFacts    map[string]map[Fact]*TripleLink // memory_id → the facts it holds
	holders     map[ObsKey]map[string]bool      // observation → the rows holding it
	active      map[group]map[ObsKey]*Observation
	closed      map[group]map[ObsKey]*Observation // closed by a rule: a fallback may state one again
	rowPairs    map[string]map[Pair]*EdgeLink     // memory_id → the pairs it names
	edges       map[Pair]*Edge                    // a pair's latest interval
	edgeHolders map[Pair]map[string]bool
	edgeNamers  map[Pair]map[string]bool // every row that ever named the pair
}

// NewState returns an empty graph.
func NewState() *State {
	return &State{rowFacts: map[string]map[Fact]*TripleLink{}, holders: map[ObsKey]map[string]bool{},
		active: map[group]map[ObsKey]*Observation{}, closed: map[group]map[ObsKey]*Observation{}, rowPairs: map[string]map[Pair]*EdgeLink{},
		edges: map[Pair]*Edge{}, edgeHolders: map[Pair]map[string]bool{}, edgeNamers: map[Pair]map[string]bool{}}
}

// LoadObservation adds an observation's latest version.
func (s *State) LoadObservation(o Observation) {
	if !o.Active() {
		inner(s.closed, o.group())[o.ObsKey] = &o
		return
	}
	inner(s.active, o.group())[o.ObsKey] = &o
}

// LoadTripleLink adds a link's latest version.
func (s *State) LoadTripleLink(l TripleLink) {
	if !l.Holds {
		return
	}
	id := l.Row.MemoryID
	inner(s.rowFacts, id)[l.Fact] = &l
	addTo(s.holders, l.obs(), id)
}

// LoadEdge adds an interval's latest version; a pair keeps its latest interval.
func (s *State) LoadEdge(e Edge) {
	if cur, ok := s.edges[e.Pair]; !ok || e.OpenedSeq > cur.OpenedSeq {
		s.edges[e.Pair] = &e
	}
}

// LoadEdgeLink adds a link's latest version.
func (s *State) LoadEdgeLink(l EdgeLink) {
	id := l.Row.MemoryID
	addTo(s.edgeNamers, l.Pair, id)
	if !l.Holds {
		return
	}
	inner(s.rowPairs, id)[l.Pair] = &l
	addTo(s.edgeHolders, l.Pair, id)
}

func addTo[K comparable](m map[K]map[string]bool, k K, id string) {
	inner(m, k)[id] = true
}

// inner is m's map under k, made when missing.
func inner[K, IK comparable, V any](m map[K]map[IK]V, k K) map[IK]V {
	if m[k] == nil {
		m[k] = map[IK]V{}
	}
	return m[k]
}

// RowIDs are the rows whose links a batch of records reads first.
func RowIDs(recs []Record) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range recs {
		if !seen[r.Row.MemoryID] {
			seen[r.Row.MemoryID] = true
			out = append(out, r.Row.MemoryID)
		}
	}
	return out
}

// Touched are the relations (subject and predicate) and pairs a batch of records
// reads, once the links of its rows are loaded: what the rows held and what they say.
func (s *State) Touched(recs []Record) (relations [][2]string, pairs []Pair) {
	rel := map[group]bool{}
	ps := map[Pair]bool{}
	for _, r := range recs {
		for f := range s.rowFacts[r.Row.MemoryID] {
			rel[f.group()] = true
		}
		for _, st := range r.Statements {
			rel[st.group()] = true
		}
		for p := range s.rowPairs[r.Row.MemoryID] {
			ps[p] = true
		}
		for _, p := range r.pairs() {
			ps[p] = true
		}
	}
	for _, g := range sortedKeys(rel, groupLess) {
		relations = append(relations, [2]string{g.subject, g.predicate})
	}
	return relations, sortedKeys(ps, pairLess)
}

// pairs are the pairs of the entities on the row.
func (r *Record) pairs() []Pair {
	var out []Pair
	for i, a := range r.Entities {
		for _, b := range r.Entities[i+1:] {
			out = append(out, pairOf(a.Name, b.Name))
		}
	}
	return out
}

// Rows are the versions a fold writes, each stamped with its record's seq and commit.
type Rows struct {
	Observations []Versioned[Observation]
	TripleLinks  []Versioned[TripleLink]
	Edges        []Versioned[Edge]
	EdgeLinks    []Versioned[EdgeLink]
	Sightings    []Versioned[Sighting]
}

// Versioned is a row version and the record that wrote it.
type Versioned[T any] struct {
	Seq uint64
	At  time.Time // the record's commit, in seconds
	Row T
}

// Len is the number of rows.
func (r *Rows) Len() int {
	return len(r.Observations) + len(r.TripleLinks) + len(r.Edges) + len(r.EdgeLinks) + len(r.Sightings)
}

// recordRows collects one record's versions, one per key: a key changed twice within
// a record (opened, then closed by the repair) is written as it ends.
type recordRows struct {
	seq   uint64
	at    time.Time
	obs   map[ObsKey]Observation
	links map[[2]any]TripleLink
	edges map[Pair]Edge
	elink map[[2]any]EdgeLink
	sight []Sighting
}

// Apply folds one record into the state and appends the versions it writes to out.
// Records must come in seq order, each once.
func (s *State) Apply(r Record, out *Rows) {
	rr := &recordRows{seq: r.Seq, at: r.At.Truncate(time.Second), obs: map[ObsKey]Observation{},
		links: map[[2]any]TripleLink{}, edges: map[Pair]Edge{}, elink: map[[2]any]EdgeLink{}}
	s.applyFacts(r, rr)
	s.applyEdges(r, rr)
	if r.HoldsEdges {
		for _, e := range r.Entities {
			rr.sight = append(rr.sight, Sighting{Name: e.Name, Alias: e.Alias, Type: e.Type, UserID: r.Row.UserID,
				MemoryID: r.Row.MemoryID})
		}
	}
	rr.flush(out)
}

func (s *State) applyFacts(r Record, rr *recordRows) {
	id := r.Row.MemoryID
	now := map[Fact]Statement{}
	if r.HoldsFacts {
		for _, st := range r.Statements {
			now[st.Fact] = st
		}
	}
	held := inner(s.rowFacts, id)
	// Drops first: a fact the row no longer states, or states over another interval,
	// leaves its observation, which closes once no row holds it.
	dropped := map[group]bool{}
	for _, f := range sortedKeys(held, factLess) {
		l := held[f]
		if st, ok := now[f]; ok && sameTime(st.From, l.StatedFrom) && sameTime(st.To, l.StatedTo) {
			if l.Row != r.Row { // the same statement on the row's new value: the link follows the row
				l.Row = r.Row
				rr.links[[2]any{f, id}] = *l
			}
			continue
		}
		delete(held, f)
		k := l.obs()
		delete(s.holders[k], id)
		gone := *l // the unlink keeps the value that stated it
		gone.Holds = false
		rr.links[[2]any{f, id}] = gone
		if o := s.active[f.group()][k]; o != nil && r.Closes && len(s.holders[k]) == 0 {
			// A fact still valid later ends now; one that had already ended keeps its end.
			end := maxTime(rr.at, o.ValidFrom)
			if o.StatedTo != nil && o.StatedTo.Before(end) {
				end = *o.StatedTo
			}
			s.close(o, end, rr)
			rr.obs[k] = *o
			if o.Cardinality == events.CardinalitySingle {
				dropped[f.group()] = true
			}
		}
	}
	// Then gains, in the order the writer stated them: each joins an active
	// observation of the same fact over the same interval, or opens one.
	repair := map[group]bool{}
	for i, st := range r.Statements {
		if _, ok := now[st.Fact]; !ok || held[st.Fact] != nil {
			continue
		}
		o := s.observationFor(st)
		if o == nil {
			o = s.open(st, r, r.seenUS(i))
			rr.obs[o.ObsKey] = *o
			if st.Cardinality == events.CardinalitySingle {
				repair[st.group()] = true
			}
		}
		l := &TripleLink{Fact: st.Fact, Row: r.Row, ObservedSeq: o.ObservedSeq, StatedFrom: st.From, StatedTo: st.To, Holds: true}
		held[st.Fact] = l
		addTo(s.holders, o.ObsKey, id)
		rr.links[[2]any{st.Fact, id}] = *l
	}
	for _, g := range sortedKeys(repair, groupLess) {
		var obs []*Observation
		for _, o := range s.active[g] {
			obs = append(obs, o)
		}
		for k, end := range Repair(obs) {
			o := s.active[g][k]
			s.close(o, end, rr)
			rr.obs[k] = *o
		}
	}
	for _, g := range sortedKeys(dropped, groupLess) {
		s.fallback(g, r, rr)
	}
}

// observationFor is the active observation a statement joins: one of its fact over
// the same stated interval.
func (s *State) observationFor(st Statement) *Observation {
	var best *Observation
	for k, o := range s.active[st.group()] {
		if k.Fact == st.Fact && sameTime(o.StatedFrom, st.From) && sameTime(o.StatedTo, st.To) &&
			(best == nil || k.ObservedSeq < best.ObservedSeq) {
			best = o
		}
	}
	return best
}

// seenUS is when the record's i-th statement is seen, in microseconds: the commit plus
// one microsecond per statement before it in the write. An undated statement whose
// own verb is a past form of a state ("lived_in") is older than another value of its
// relation in the write, whichever is stated first: it is seen a microsecond before
// the earliest start of such a value, when that start is earlier. Another undated
// past value keeps the statement order, which alone moves nothing.
func (r *Record) seenUS(i int) int64 {
	at := r.At.UnixMicro()
	st, seen := r.Statements[i], at+int64(i)
	if !st.Past || st.From != nil {
		return seen
	}
	for j, other := range r.Statements {
		if other.group() != st.group() || other.Object == st.Object || other.Past && other.From == nil {
			continue
		}
		start := at + int64(j)
		if other.From != nil {
			start = other.From.UnixMicro()
		}
		if start <= seen {
			seen = start - 1
		}
	}
	return seen
}

// open starts an observation of a statement, seen at seenUS. Undated, it starts when
// seen. An Undo's marker starts at the restore (or at a later stated start), and
// keeps a stated end still to come.
func (s *State) open(st Statement, r Record, seenUS int64) *Observation {
	start := time.UnixMicro(seenUS).UTC().Truncate(time.Second)
	if st.From != nil {
		start = *st.From
	}
	at := r.At.Truncate(time.Second)
	if r.Restore && (st.To == nil || st.To.After(at)) && at.After(start) {
		start = at
	}
	if st.To != nil && st.To.Before(start) {
		start = *st.To // an end already past with no start of its own: the fact is history
	}
	o := &Observation{ObsKey: ObsKey{st.Fact, r.Seq}, Cardinality: st.Cardinality, ValidFrom: start, ValidTo: st.To,
		StatedFrom: st.From, StatedTo: st.To, SeenUS: seenUS, Restored: r.Restore}
	inner(s.active, st.group())[o.ObsKey] = o
	return o
}

// close ends an active observation at end, closed at the record's commit.
func (s *State) close(o *Observation, end time.Time, rr *recordRows) {
	at := rr.at
	o.ValidTo, o.InvalidAt = &end, &at
	delete(s.active[o.group()], o.ObsKey)
	inner(s.closed, o.group())[o.ObsKey] = o
}

// fallback keeps one value current when a drop left a single-valued relation with
// no value valid now or later: the newest value that a rule closed and a row still
// holds is stated again from this record on (a fallback observation, seen after the
// record's own statements), and the rows holding it move to the new observation. A
// value that ended on its own stays ended.
func (s *State) fallback(g group, r Record, rr *recordRows) {
	for _, o := range s.active[g] {
		if o.ValidTo == nil || o.ValidTo.After(rr.at) {
			return
		}
	}
	var best *Observation
	for k, o := range s.closed[g] {
		if len(s.holders[k]) == 0 || o.Cardinality != events.CardinalitySingle || (o.StatedTo != nil && !o.StatedTo.After(rr.at)) {
			continue
		}
		if best == nil || keyOf(o).after(keyOf(best)) {
			best = o
		}
	}
	if best == nil {
		return
	}
	o := s.open(Statement{Fact: best.Fact, Cardinality: best.Cardinality, To: best.StatedTo}, Record{Seq: r.Seq, At: r.At}, r.At.UnixMicro()+int64(len(r.Statements)))
	o.ValidFrom, o.Fallback = rr.at, true
	rr.obs[o.ObsKey] = *o
	for _, id := range sortedKeys(s.holders[best.ObsKey], func(a, b string) bool { return a < b }) {
		l := s.rowFacts[id][best.Fact]
		l.ObservedSeq = o.ObservedSeq
		addTo(s.holders, o.ObsKey, id)
		rr.links[[2]any{best.Fact, id}] = *l
	}
	delete(s.holders, best.ObsKey)
}

func (s *State) applyEdges(r Record, rr *recordRows) {
	id := r.Row.MemoryID
	now := map[Pair]bool{}
	var order []Pair
	if r.HoldsEdges {
		for _, p := range r.pairs() {
			if !now[p] {
				now[p] = true
				order = append(order, p)
			}
		}
	}
	held := inner(s.rowPairs, id)
	for _, p := range sortedKeys(held, pairLess) {
		l := held[p]
		if now[p] {
			if l.Row != r.Row {
				l.Row = r.Row
				rr.elink[[2]any{p, id}] = *l
			}
			continue
		}
		delete(held, p)
		delete(s.edgeHolders[p], id)
		gone := *l
		gone.Holds = false
		rr.elink[[2]any{p, id}] = gone
		if e := s.edges[p]; e != nil && e.ValidTo == nil && r.Closes && len(s.edgeHolders[p]) == 0 {
			end := maxTime(rr.at, e.ValidFrom)
			e.ValidTo = &end
			rr.edges[p] = *e
		}
	}
	for _, p := range order {
		if held[p] != nil {
			continue
		}
		first := !s.edgeNamers[p][id]
		addTo(s.edgeNamers, p, id)
		e := s.edges[p]
		if e == nil || e.ValidTo != nil {
			e = &Edge{Pair: p, OpenedSeq: r.Seq, ValidFrom: rr.at, Weight: uint32(len(s.edgeNamers[p]))}
			s.edges[p] = e
			rr.edges[p] = *e
		} else if first {
			e.Weight = uint32(len(s.edgeNamers[p]))
			rr.edges[p] = *e
		}
		l := &EdgeLink{Pair: p, Row: r.Row, OpenedSeq: e.OpenedSeq, Holds: true}
		held[p] = l
		addTo(s.edgeHolders, p, id)
		rr.elink[[2]any{p, id}] = *l
	}
}

func (rr *recordRows) flush(out *Rows) {
	for _, o := range rr.obs {
		out.Observations = append(out.Observations, Versioned[Observation]{rr.seq, rr.at, o})
	}
	for _, l := range rr.links {
		out.TripleLinks = append(out.TripleLinks, Versioned[TripleLink]{rr.seq, rr.at, l})
	}
	for _, e := range rr.edges {
		out.Edges = append(out.Edges, Versioned[Edge]{rr.seq, rr.at, e})
	}
	for _, l := range rr.elink {
		out.EdgeLinks = append(out.EdgeLinks, Versioned[EdgeLink]{rr.seq, rr.at, l})
	}
	for _, s := range rr.sight {
		out.Sightings = append(out.Sightings, Versioned[Sighting]{rr.seq, rr.at, s})
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
