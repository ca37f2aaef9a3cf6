// Package graph holds the rules of the entity graph: which rows hold facts and
// edges, how one revision changes the graph (Apply), and which value of a
// single-valued relation stays current (Repair). It reads and writes no store: the
// projector loads the State a batch needs from ClickHouse, folds the batch's records
// over it in seq order, and writes the rows the fold returns. Every row it returns is
// a version stamped with the seq of the record that wrote it, so the same records in
// the same order give the same rows, whatever the batches they came in.
package graph

import (
	"sort"
	"time"
)

// Fact is a triple, its entities in canonical form.
type Fact struct{ Subject, Predicate, Object string }

// group is a fact's subject and predicate: the values of one relation of one subject.
type group struct{ subject, predicate string }

func (f Fact) group() group { return group{f.Subject, f.Predicate} }

// ObsKey names one observation of a fact: the fact and the seq that opened it.
type ObsKey struct {
	Fact
	ObservedSeq uint64
}

// Pair is two entities named on one row, in name order.
type Pair struct{ A, B string }

// pairOf orders two entity names into a pair.
func pairOf(a, b string) Pair {
	if b < a {
		a, b = b, a
	}
	return Pair{a, b}
}

// RowRef is the memory row a link names: enough to find the row again (search
// validates it against the Postgres head) and to erase it by user.
type RowRef struct {
	MemoryID      string
	Agent         string
	UserID        string
	SessionID     string
	MemoryKey     string
	ContentSHA256 string
	MemoryType    string
}

// Observation is one interval of a fact (an entity_triples row): opened by a
// statement (ObservedSeq), closed by a rule (InvalidAt, with ValidTo the end).
type Observation struct {
	ObsKey
	Cardinality string
	ValidFrom   time.Time  // the stated start, else when it was seen
	ValidTo     *time.Time // the stated end, or the end a close gave
	StatedFrom  *time.Time
	StatedTo    *time.Time
	InvalidAt   *time.Time // when a rule closed it; nil while it is active
	SeenUS      int64      // when it was seen, in microseconds: the order of one write's statements
	Restored    bool       // an Undo's marker
	Fallback    bool       // a value stated again when the newer one that closed it went away
}

// Active reports whether no rule has closed the observation; a stated end may still
// have passed.
func (o *Observation) Active() bool { return o.InvalidAt == nil }

// TripleLink says a row holds a fact, and which observation its statement is part
// of (an entity_triple_rows row).
type TripleLink struct {
	Fact
	Row         RowRef
	ObservedSeq uint64
	StatedFrom  *time.Time
	StatedTo    *time.Time
	Holds       bool
}

func (l *TripleLink) obs() ObsKey { return ObsKey{l.Fact, l.ObservedSeq} }

// Edge is one interval of a co-occurrence (an entity_edges row): open while a row
// names both entities. Weight is the number of rows that ever named both.
type Edge struct {
	Pair
	OpenedSeq uint64
	ValidFrom time.Time
	ValidTo   *time.Time
	Weight    uint32
}

// EdgeLink says a row names both entities of a pair (an entity_edge_rows row).
type EdgeLink struct {
	Pair
	Row       RowRef
	OpenedSeq uint64
	Holds     bool
}

// Sighting is an entity named on a row (an entities row): its canonical name, the
// spelling used, the type declared, and the user of the row; and the row's memory,
// which the entity_sightings row keeps so a redaction finds what a version declared.
type Sighting struct {
	Name, Alias, Type, UserID string
	MemoryID                  string
}

// sameTime compares two optional times.
func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

func sortedKeys[K comparable, V any](m map[K]V, less func(a, b K) bool) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return less(out[i], out[j]) })
	return out
}

func factLess(a, b Fact) bool {
	if a.Subject != b.Subject {
		return a.Subject < b.Subject
	}
	if a.Predicate != b.Predicate {
		return a.Predicate < b.Predicate
	}
	return a.Object < b.Object
}

func groupLess(a, b group) bool {
	return a.subject < b.subject || a.subject == b.subject && a.predicate < b.predicate
}

func pairLess(a, b Pair) bool {
	if a.A != b.A {
		return a.A < b.A
	}
	return a.B < b.B
}
