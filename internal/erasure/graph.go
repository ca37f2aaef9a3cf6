package erasure

import (
	"context"
	"fmt"
	"strings"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/tableset"
)

// The graph's tables (schemas/clickhouse/006_graph.sql). The row links and the
// entities carry user_id, so a fence's predicate finds a user's part of them. Facts
// and edges are shared by every row that states them and carry no user: a user's
// records wrote versions of them keyed by their seq (an opening, a close of another
// value, an Undo), and opened observations others may since have joined.
const (
	graphTriples  = "entity_triples"
	graphEdges    = "entity_edges"
	graphTripleOf = "entity_triple_rows"
	graphEdgeOf   = "entity_edge_rows"
	graphEntities = "entities"
)

// userless reports whether a table has no user_id column: a user's fence cannot be
// read on it directly.
func userless(table string) bool { return table == graphTriples || table == graphEdges }

// sharedGraph is how one shared table is erased for a user: which column names the
// observation a version belongs to, the columns that identify it, and the link table
// whose other users' rows keep it.
type sharedGraph struct {
	table, opened, ident, links string
}

var sharedGraphs = []sharedGraph{
	{table: graphTriples, opened: "observed_seq", ident: "subject, predicate, object, observed_seq", links: graphTripleOf},
	{table: graphEdges, opened: "opened_seq", ident: "entity_a, entity_b, opened_seq", links: graphEdgeOf},
}

// graphOwner is whose part of the shared graph goes: a user's (an erasure's fence) or
// a withdrawn promoted copy's (its memory id, below its withdrawal's record). is and
// isNot are the predicates on a link row, each binding arg; a user's entity rows name
// it too, where an entity row names no memory.
type graphOwner struct {
	org, namespace string
	below          uint64
	is, isNot      string
	arg            any
	entities       bool
}

func userOwner(f Fence) graphOwner {
	return graphOwner{org: f.Org, namespace: f.Namespace, below: uint64(f.Seq), is: "user_id = ?", isNot: "user_id != ?", arg: f.UserID, entities: true}
}

func copyOwner(r Redaction) graphOwner {
	return graphOwner{org: r.Org, namespace: r.Namespace, below: uint64(r.Seq),
		is: "memory_id = toUUID(?)", isNot: "memory_id != toUUID(?)", arg: r.MemoryID}
}

// eraseSharedGraph removes an owner's part of the shared graph tables, before its link
// and entity rows go (the links are how it is found, so a run stopped half-way finds
// it again): every version its records wrote, except the opening of an observation
// another row still holds, and every observation its records opened that no other
// row holds. Removing the versions its records wrote undoes the closes and fallbacks
// its writes caused on others' facts, as a fold without them would. It reads and
// mutates one set of the projection tables.
func eraseSharedGraph(ctx context.Context, conn *ch.Conn, set tableset.Present, o graphOwner) error {
	for _, t := range []string{graphTripleOf, graphEdgeOf, graphEntities, graphTriples, graphEdges} {
		if !set.Has(t) {
			return nil // a set still being created holds nothing of the graph yet
		}
	}
	seqs, err := ownerGraphSeqs(ctx, conn, set.Set, o)
	if err != nil || len(seqs) == 0 {
		return err
	}
	for _, g := range sharedGraphs {
		kept, err := keptObservations(ctx, conn, set.Set, o, g, seqs)
		if err != nil {
			return err
		}
		m := ch.Mutation{Table: set.Set.Name(g.table),
			Where: fmt.Sprintf(`org = ? AND namespace = ? AND seq < ? AND (
				(has(?, %[1]s) AND NOT has(?, cityHash64(%[2]s))) OR (has(?, seq) AND seq != %[1]s))`, g.opened, g.ident),
			Args: []any{o.org, o.namespace, o.below, seqs, kept, seqs}}
		if _, err := conn.Mutate(ctx, m); err != nil {
			return fmt.Errorf("erase the owner's part of %s: %w", m.Table, err)
		}
	}
	return nil
}

// ownerGraphSeqs are the seqs of the owner's records that wrote to the graph, below
// its fence: each such record wrote a link (or, of a user, an entity row) of it.
func ownerGraphSeqs(ctx context.Context, conn *ch.Conn, set tableset.Set, o graphOwner) ([]uint64, error) {
	tables := []string{graphTripleOf, graphEdgeOf}
	if o.entities {
		tables = append(tables, graphEntities)
	}
	var parts []string
	var args []any
	for _, t := range tables {
		parts = append(parts, fmt.Sprintf("SELECT seq FROM %s WHERE org = ? AND namespace = ? AND %s AND seq < ?", set.Qualified(t), o.is))
		args = append(args, o.org, o.namespace, o.arg, o.below)
	}
	q := "SELECT DISTINCT seq FROM (" + strings.Join(parts, " UNION ALL ") + ")"
	return scanUint64s(ctx, conn, q, args, "read the owner's graph seqs")
}

// keptObservations are the observations the owner's records opened that another
// row holds, as cityHash64 of their identity.
func keptObservations(ctx context.Context, conn *ch.Conn, set tableset.Set, o graphOwner, g sharedGraph, seqs []uint64) ([]uint64, error) {
	q := fmt.Sprintf(`SELECT DISTINCT cityHash64(%s) FROM %s WHERE org = ? AND namespace = ? AND %s AND has(?, %s)`,
		g.ident, set.Qualified(g.links), o.isNot, g.opened)
	kept, err := scanUint64s(ctx, conn, q, []any{o.org, o.namespace, o.arg, seqs}, "read the observations others hold in "+g.links)
	if kept == nil {
		kept = []uint64{0} // an empty array literal has no type on 18.16
	}
	return kept, err
}

func scanUint64s(ctx context.Context, conn *ch.Conn, q string, args []any, what string) ([]uint64, error) {
	rows, err := conn.Query(conn.Ctx(ctx), q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []uint64
	for rows.Next() {
		var v uint64
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}
