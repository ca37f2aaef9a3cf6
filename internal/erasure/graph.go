package erasure

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/go-faster/city"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/memrow"
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
		orphans, err := orphanedObservations(ctx, conn, set.Set, o, g)
		if err != nil {
			return err
		}
		m := ch.Mutation{Table: set.Set.Name(g.table),
			Where: fmt.Sprintf(`org = ? AND namespace = ? AND seq < ? AND (
				(has(?, %[1]s) AND NOT has(?, cityHash64(%[2]s))) OR (has(?, seq) AND seq != %[1]s) OR has(?, cityHash64(%[2]s)))`, g.opened, g.ident),
			Args: []any{o.org, o.namespace, o.below, seqs, kept, seqs, orphans}}
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

// orphanedObservations are the observations the owner's links hold and no other
// row's link does, as cityHash64 of their identity, whoever's record opened them: an
// observation two owners held, opened by the one erased first, is kept then for the
// other, and goes with the other's erasure.
func orphanedObservations(ctx context.Context, conn *ch.Conn, set tableset.Set, o graphOwner, g sharedGraph) ([]uint64, error) {
	links := set.Qualified(g.links)
	q := fmt.Sprintf(`SELECT DISTINCT cityHash64(%[1]s) FROM %[2]s WHERE org = ? AND namespace = ? AND %[3]s AND seq < ?
		AND cityHash64(%[1]s) NOT IN (SELECT cityHash64(%[1]s) FROM %[2]s WHERE org = ? AND namespace = ? AND %[4]s)`,
		g.ident, links, o.is, o.isNot)
	orphans, err := scanUint64s(ctx, conn, q, []any{o.org, o.namespace, o.arg, o.below, o.org, o.namespace, o.arg}, "read the observations only the owner holds in "+g.links)
	if orphans == nil {
		orphans = []uint64{0} // an empty array literal has no type on 18.16
	}
	return orphans, err
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

// versionsTable is the history, whose rows' entities are the names each version
// declared (as written: the graph names them through memrow.EntityName).
const versionsTable = "memory_versions"

// entityOwner is whose entity rows go with a withdrawal or a redaction. An entity row
// names no memory, and the rows of one user's spelling and type of a name collapse into
// the latest sighting (ReplacingMergeTree(seq)), so a row's seq does not say which
// records sighted it: entity_sightings does (eraseOwnedEntities), and for a record
// older than it an entity of the owner's user goes when the owner's records named it
// and no other record of the user does. A sighting is a declared entity (a
// memory_versions row's entities) or a relation's subject or object (a fact's link,
// and, as any two entities on a row, a pair's). own and other are predicates on a
// link row, a memory_versions row and an entity_sightings row (all carry memory_id and
// seq), each binding its args: the owner's rows, and the rows whose naming keeps an
// entity.
type entityOwner struct {
	org, namespace, user string
	below                uint64
	own, other           string
	ownArgs, otherArgs   []any
}

// eraseNamedEntities removes the entity rows of the owner's user that only the
// owner's records named, below its record: the rule for records no sighting row
// records (eraseOwnedEntities). Names are bound as cityHash64 of the name, as a fence
// binds its user: a mutation's command is kept on disk.
func eraseNamedEntities(ctx context.Context, conn *ch.Conn, set tableset.Set, e entityOwner) error {
	seqs, err := e.seqs(ctx, conn, set)
	if err != nil {
		return err
	}
	named, err := namesSighted(ctx, conn, set, e, e.own, e.ownArgs)
	if err != nil {
		return err
	}
	if len(seqs) > 0 {
		q := fmt.Sprintf(`SELECT DISTINCT cityHash64(name) FROM %s WHERE org = ? AND namespace = ? AND cityHash64(user_id) = ? AND has(?, seq)`,
			set.Qualified(graphEntities))
		atSeqs, err := scanUint64s(ctx, conn, q, []any{e.org, e.namespace, city.CH64([]byte(e.user)), seqs}, "read the owner's entity rows")
		if err != nil {
			return err
		}
		for _, h := range atSeqs {
			named[h] = true
		}
	}
	if len(named) == 0 {
		return nil
	}
	others, err := namesSighted(ctx, conn, set, e, e.other, e.otherArgs)
	if err != nil {
		return err
	}
	var gone []uint64
	for h := range named {
		if !others[h] {
			gone = append(gone, h)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	slices.Sort(gone)
	m := ch.Mutation{Table: set.Name(graphEntities),
		Where: "org = ? AND namespace = ? AND cityHash64(user_id) = ? AND seq < ? AND has(?, cityHash64(name))",
		Args:  []any{e.org, e.namespace, city.CH64([]byte(e.user)), e.below, gone}}
	if _, err := conn.Mutate(ctx, m); err != nil {
		return fmt.Errorf("erase the owner's entities from %s: %w", m.Table, err)
	}
	return nil
}

// seqs are the seqs of the owner's records that left a link or a version row.
func (e entityOwner) seqs(ctx context.Context, conn *ch.Conn, set tableset.Set) ([]uint64, error) {
	var parts []string
	var args []any
	for _, t := range []string{graphTripleOf, graphEdgeOf, versionsTable} {
		parts = append(parts, fmt.Sprintf("SELECT seq FROM %s WHERE org = ? AND namespace = ? AND cityHash64(user_id) = ? AND seq < ? AND %s",
			set.Qualified(t), e.own))
		args = append(append(args, e.org, e.namespace, city.CH64([]byte(e.user)), e.below), e.ownArgs...)
	}
	return scanUint64s(ctx, conn, "SELECT DISTINCT seq FROM ("+strings.Join(parts, " UNION ALL ")+")", args, "read the owner's record seqs")
}

// namesSighted are the entity names (cityHash64) the user's rows matching pred name:
// their links' entities, and their versions' declared entities in canonical form.
func namesSighted(ctx context.Context, conn *ch.Conn, set tableset.Set, e entityOwner, pred string, args []any) (map[uint64]bool, error) {
	user := city.CH64([]byte(e.user))
	out := map[uint64]bool{}
	links := []struct{ table, names string }{{graphTripleOf, "[subject, object]"}, {graphEdgeOf, "[entity_a, entity_b]"}}
	for _, l := range links {
		q := fmt.Sprintf(`SELECT DISTINCT cityHash64(arrayJoin(%s)) FROM %s WHERE org = ? AND namespace = ? AND cityHash64(user_id) = ? AND %s`,
			l.names, set.Qualified(l.table), pred)
		hs, err := scanUint64s(ctx, conn, q, append([]any{e.org, e.namespace, user}, args...), "read the entities "+l.table+" names")
		if err != nil {
			return nil, err
		}
		for _, h := range hs {
			out[h] = true
		}
	}
	q := fmt.Sprintf(`SELECT DISTINCT arrayJoin(entities) FROM %s WHERE org = ? AND namespace = ? AND cityHash64(user_id) = ? AND %s`,
		set.Qualified(versionsTable), pred)
	rows, err := conn.Query(conn.Ctx(ctx), q, append([]any{e.org, e.namespace, user}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("read the declared entities: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("read the declared entities: %w", err)
		}
		if canon := memrow.EntityName(name); canon != "" {
			out[city.CH64([]byte(canon))] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the declared entities: %w", err)
	}
	return out, nil
}

// hasGraph reports whether a set holds the graph's tables and the history they are
// read beside; a set still being created holds nothing of the graph yet.
func hasGraph(set tableset.Present) bool {
	for _, t := range []string{graphTripleOf, graphEdgeOf, graphEntities, graphTriples, graphEdges, versionsTable} {
		if !set.Has(t) {
			return false
		}
	}
	return true
}

// copyEntities is a withdrawn copy's entity owner: the copy's rows (of
// memrow.SharedUser) are its own, and every row of the shared user but those of the
// copies withdrawn with it keeps an entity.
func copyEntities(r Redaction, withdrawn []string) entityOwner {
	return entityOwner{org: r.Org, namespace: r.Namespace, user: memrow.SharedUser, below: uint64(r.Seq),
		own: "memory_id = toUUID(?)", ownArgs: []any{r.MemoryID},
		other: "NOT has(?, toString(memory_id))", otherArgs: []any{withdrawn}}
}

// eraseRedactedGraph removes what a plain redaction's versions wrote to the graph, as
// they are found through the memory's links and history before the scrub: the
// observations (facts and pairs) those versions opened that no other row and none of
// the memory's other versions holds, with every version and link of them; the
// memory's links those versions wrote that hold a fact or a pair (the statements of
// the redacted text); the content hash of the rest of them (a drop of what an earlier
// version stated); and the entity rows only those versions named. The closes those
// versions caused stay: a later version of the memory was folded over them, and
// without them a fact they ended would read as open again.
func eraseRedactedGraph(ctx context.Context, conn *ch.Conn, set tableset.Present, r Redaction) error {
	if !hasGraph(set) || len(r.Versions) == 0 {
		return nil
	}
	seqs, user, err := redactedSeqs(ctx, conn, set.Set, r)
	if err != nil || len(seqs) == 0 {
		return err
	}
	below := uint64(r.Seq)
	for _, g := range sharedGraphs {
		ident := "cityHash64(" + g.ident + ")"
		// The observations the memory holds at a version the redaction leaves.
		held, err := scanUint64s(ctx, conn, fmt.Sprintf(`SELECT DISTINCT %s FROM %s WHERE org = ? AND namespace = ?
			AND memory_id = toUUID(?) AND NOT has(?, seq) AND holds = 1`, ident, set.Set.Qualified(g.links)),
			[]any{r.Org, r.Namespace, r.MemoryID, seqs}, "read the observations the memory's other versions hold in "+g.links)
		if err != nil {
			return err
		}
		others, err := scanUint64s(ctx, conn, fmt.Sprintf(`SELECT DISTINCT %s FROM %s WHERE org = ? AND namespace = ?
			AND memory_id != toUUID(?) AND has(?, %s)`, ident, set.Set.Qualified(g.links), g.opened),
			[]any{r.Org, r.Namespace, r.MemoryID, seqs}, "read the observations others hold in "+g.links)
		if err != nil {
			return err
		}
		kept := append(append([]uint64{0}, held...), others...) // an empty array literal has no type on 18.16
		held = append([]uint64{0}, held...)
		mutations := []ch.Mutation{
			{Table: set.Set.Name(g.table),
				Where: fmt.Sprintf("org = ? AND namespace = ? AND seq < ? AND has(?, %s) AND NOT has(?, %s)", g.opened, ident),
				Args:  []any{r.Org, r.Namespace, below, seqs, kept}},
			{Table: set.Set.Name(g.links),
				Where: fmt.Sprintf(`org = ? AND namespace = ? AND memory_id = toUUID(?) AND seq < ?
					AND ((has(?, seq) AND holds = 1) OR NOT has(?, %s))`, ident),
				Args: []any{r.Org, r.Namespace, r.MemoryID, below, seqs, held}},
			{Table: set.Set.Name(g.links), Set: "content_sha256 = ''",
				Where: "org = ? AND namespace = ? AND memory_id = toUUID(?) AND has(?, seq) AND content_sha256 != ''",
				Args:  []any{r.Org, r.Namespace, r.MemoryID, seqs}},
		}
		for _, m := range mutations {
			if _, err := conn.Mutate(ctx, m); err != nil {
				return fmt.Errorf("erase the redacted versions' part of %s: %w", m.Table, err)
			}
		}
	}
	return eraseOwnedEntities(ctx, conn, set, entityOwner{org: r.Org, namespace: r.Namespace, user: user, below: below,
		own: "memory_id = toUUID(?) AND has(?, seq)", ownArgs: []any{r.MemoryID, seqs},
		other: "NOT (memory_id = toUUID(?) AND has(?, seq))", otherArgs: []any{r.MemoryID, seqs}})
}

// redactedSeqs are the seqs of the records that wrote a redaction's versions, and the
// memory's user, from its history (a scrub keeps the rows).
func redactedSeqs(ctx context.Context, conn *ch.Conn, set tableset.Set, r Redaction) ([]uint64, string, error) {
	versions := make([]uint64, len(r.Versions))
	for i, v := range r.Versions {
		versions[i] = uint64(v)
	}
	rows, err := conn.Query(conn.Ctx(ctx), fmt.Sprintf(`SELECT DISTINCT seq, user_id FROM %s WHERE org = ? AND namespace = ?
		AND memory_id = toUUID(?) AND has(?, version) AND seq < ?`, set.Qualified(versionsTable)),
		r.Org, r.Namespace, r.MemoryID, versions, uint64(r.Seq))
	if err != nil {
		return nil, "", fmt.Errorf("read the redacted versions' seqs: %w", err)
	}
	defer rows.Close()
	var seqs []uint64
	var user string
	for rows.Next() {
		var seq uint64
		if err := rows.Scan(&seq, &user); err != nil {
			return nil, "", fmt.Errorf("read the redacted versions' seqs: %w", err)
		}
		seqs = append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("read the redacted versions' seqs: %w", err)
	}
	return seqs, user, nil
}
