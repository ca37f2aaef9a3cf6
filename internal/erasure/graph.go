package erasure

import (
	"context"
	"fmt"

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

// eraseSharedGraph removes a user's part of the shared graph tables, before its link
// and entity rows go (the links are how it is found, so a run stopped half-way finds
// it again): every version its records wrote, except the opening of an observation
// another user's row still holds, and every observation its records opened that no
// other user's row holds. Removing the versions its records wrote undoes the closes
// and fallbacks its writes caused on others' facts, as a fold without them would. It
// reads and mutates one set of the projection tables.
func eraseSharedGraph(ctx context.Context, conn *ch.Conn, set tableset.Present, f Fence) error {
	for _, t := range []string{graphTripleOf, graphEdgeOf, graphEntities, graphTriples, graphEdges} {
		if !set.Has(t) {
			return nil // a set still being created holds nothing of the graph yet
		}
	}
	seqs, err := userGraphSeqs(ctx, conn, set.Set, f)
	if err != nil || len(seqs) == 0 {
		return err
	}
	for _, g := range sharedGraphs {
		kept, err := keptObservations(ctx, conn, set.Set, f, g, seqs)
		if err != nil {
			return err
		}
		m := ch.Mutation{Table: set.Set.Name(g.table),
			Where: fmt.Sprintf(`org = ? AND namespace = ? AND seq < ? AND (
				(has(?, %[1]s) AND NOT has(?, cityHash64(%[2]s))) OR (has(?, seq) AND seq != %[1]s))`, g.opened, g.ident),
			Args: []any{f.Org, f.Namespace, uint64(f.Seq), seqs, kept, seqs}}
		if _, err := conn.Mutate(ctx, m); err != nil {
			return fmt.Errorf("erase the user's part of %s: %w", m.Table, err)
		}
	}
	return nil
}

// userGraphSeqs are the seqs of the user's records that wrote to the graph, below the
// fence: each such record wrote a link or an entity row of the user.
func userGraphSeqs(ctx context.Context, conn *ch.Conn, set tableset.Set, f Fence) ([]uint64, error) {
	q := fmt.Sprintf(`SELECT DISTINCT seq FROM (
		SELECT seq FROM %[1]s WHERE org = ? AND namespace = ? AND user_id = ? AND seq < ?
		UNION ALL SELECT seq FROM %[2]s WHERE org = ? AND namespace = ? AND user_id = ? AND seq < ?
		UNION ALL SELECT seq FROM %[3]s WHERE org = ? AND namespace = ? AND user_id = ? AND seq < ?)`,
		set.Qualified(graphTripleOf), set.Qualified(graphEdgeOf), set.Qualified(graphEntities))
	var args []any
	for range 3 {
		args = append(args, f.Org, f.Namespace, f.UserID, uint64(f.Seq))
	}
	return scanUint64s(ctx, conn, q, args, "read the user's graph seqs")
}

// keptObservations are the observations the user's records opened that another
// user's row holds, as cityHash64 of their identity.
func keptObservations(ctx context.Context, conn *ch.Conn, set tableset.Set, f Fence, g sharedGraph, seqs []uint64) ([]uint64, error) {
	q := fmt.Sprintf(`SELECT DISTINCT cityHash64(%s) FROM %s WHERE org = ? AND namespace = ? AND user_id != ? AND has(?, %s)`,
		g.ident, set.Qualified(g.links), g.opened)
	kept, err := scanUint64s(ctx, conn, q, []any{f.Org, f.Namespace, f.UserID, seqs}, "read the observations others hold in "+g.links)
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
