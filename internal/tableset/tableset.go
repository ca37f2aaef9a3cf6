// Package tableset names the generations of the projection tables. The tables the
// query side reads are the serving set, loom.<table>; a rebuild builds a fresh set
// beside them under a generation suffix, loom.<table>__g<N>, and the switch renames
// the two sets into each other's place, so the old set is kept as loom.<table>__g<M>
// until it is dropped. Everything that reads or mutates projection tables by name
// goes through a Set, and everything that must reach every copy of a table (an
// erasure, a redaction, the residue census) lists the sets that exist (Existing).
package tableset

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/loomplane/loom/internal/ch"
)

// Projection are the tables a projection writes, in the order a rebuild creates them.
func Projection() []string {
	return []string{"memory", "memory_versions", "memory_embeddings", "memory_lexical", "memory_chunks", "audit_log",
		"entities", "entity_triples", "entity_triple_rows", "entity_edges", "entity_edge_rows", "documents", "chunks",
		"entity_sightings"}
}

// Set is one generation of the projection tables. The zero Set is the serving one.
type Set struct {
	// Gen is the generation a non-serving set was built as (a rebuild under way) or
	// served as (a set kept after a switch); 0 is the serving set, whatever its number.
	Gen int
}

// Serving is the set the query side reads.
func Serving() Set { return Set{} }

// Of is the non-serving set of generation gen.
func Of(gen int) Set { return Set{Gen: gen} }

// IsServing reports whether s is the serving set.
func (s Set) IsServing() bool { return s.Gen == 0 }

// Name is table's name in the set, without the database: memory, memory__g3.
func (s Set) Name(table string) string {
	if s.IsServing() {
		return table
	}
	return fmt.Sprintf("%s__g%d", table, s.Gen)
}

// Qualified is table's name in the set with the database: loom.memory__g3.
func (s Set) Qualified(table string) string { return ch.Database + "." + s.Name(table) }

func (s Set) String() string {
	if s.IsServing() {
		return "serving"
	}
	return fmt.Sprintf("generation %d", s.Gen)
}

var generationName = regexp.MustCompile(`^([a-z_]+?)__g([1-9][0-9]*)$`)

// Parse reads a table name (without the database) of some set: the projection table
// it is a copy of and its set. ok is false for a name that is no projection table's.
func Parse(name string) (table string, s Set, ok bool) {
	if m := generationName.FindStringSubmatch(name); m != nil {
		gen, err := strconv.Atoi(m[2])
		if err == nil && isProjection(m[1]) {
			return m[1], Of(gen), true
		}
		return "", Set{}, false
	}
	return name, Serving(), isProjection(name)
}

func isProjection(table string) bool {
	for _, t := range Projection() {
		if t == table {
			return true
		}
	}
	return false
}
