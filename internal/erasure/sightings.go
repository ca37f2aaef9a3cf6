package erasure

import (
	"context"
	"fmt"
	"slices"

	"github.com/go-faster/city"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/tableset"
)

// graphSightings keeps every sighting of an entity row by the record (memory and seq)
// that declared it (schemas/clickhouse/017_entity_sightings.sql).
const graphSightings = "entity_sightings"

// sightedTuple is the identity of an entities row: one spelling and type of a name for
// one user.
const sightedTuple = "cityHash64(name, user_id, alias, entity_type)"

// eraseOwnedEntities removes the entity rows of the owner's user that only the owner's
// records put there, below its record, and then the owner's sightings. A record the
// sightings table records takes each spelling and type it declared that no other
// record's sighting holds (eraseSightedEntities). A record older than the namespace's
// first sighting (projected before the table existed, and not replayed since) is
// recorded nowhere: it takes what it named as before, each name no other record names
// (eraseNamedEntities).
func eraseOwnedEntities(ctx context.Context, conn *ch.Conn, set tableset.Present, e entityOwner) error {
	since := e.below
	if set.Has(graphSightings) {
		first, err := firstSighting(ctx, conn, set.Set, e)
		if err != nil {
			return err
		}
		since = min(since, first)
		if err := eraseSightedEntities(ctx, conn, set.Set, e, since); err != nil {
			return err
		}
	}
	return eraseNamedEntities(ctx, conn, set.Set, e.before(since))
}

// firstSighting is the seq of the namespace's first sighting row, or the owner's record
// when it holds none: every record below it was projected before the table existed (or
// declared no entity).
func firstSighting(ctx context.Context, conn *ch.Conn, set tableset.Set, e entityOwner) (uint64, error) {
	var first, n uint64
	q := fmt.Sprintf("SELECT min(seq), count() FROM %s WHERE org = ? AND namespace = ?", set.Qualified(graphSightings))
	if err := conn.QueryRow(conn.Ctx(ctx), q, e.org, e.namespace).Scan(&first, &n); err != nil {
		return 0, fmt.Errorf("read the namespace's first entity sighting: %w", err)
	}
	if n == 0 {
		return e.below, nil
	}
	return first, nil
}

// eraseSightedEntities removes the entity rows whose spelling and type only the owner's
// sightings hold, then those sightings. A tuple stays while another record's sighting
// holds it, or while a record older than since (which no sighting records) may have
// written its row (olderNamings). Tuples are bound as cityHash64, as names are
// (eraseNamedEntities).
func eraseSightedEntities(ctx context.Context, conn *ch.Conn, set tableset.Set, e entityOwner, since uint64) error {
	table, user := set.Qualified(graphSightings), city.CH64([]byte(e.user))
	own, err := ownTuples(ctx, conn, set, e)
	if err != nil || len(own) == 0 {
		return err
	}
	candidates := make([]uint64, 0, len(own))
	for t := range own {
		candidates = append(candidates, t)
	}
	slices.Sort(candidates)
	held, err := scanUint64s(ctx, conn, fmt.Sprintf(`SELECT DISTINCT %[1]s FROM %[2]s WHERE org = ? AND namespace = ?
		AND cityHash64(user_id) = ? AND has(?, %[1]s) AND (%[3]s)`, sightedTuple, table, e.other),
		append([]any{e.org, e.namespace, user, candidates}, e.otherArgs...), "read the entity sightings others hold")
	if err != nil {
		return err
	}
	for _, t := range held {
		delete(own, t)
	}
	if len(own) == 0 {
		return deleteSightings(ctx, conn, set, e, nil)
	}
	names := make([]uint64, 0, len(own))
	for _, s := range own {
		names = append(names, s.name)
	}
	slices.Sort(names)
	older, err := olderNamings(ctx, conn, set, e, since, slices.Compact(names))
	if err != nil {
		return err
	}
	var gone []uint64
	for t, s := range own {
		if !older.holds(s) {
			gone = append(gone, t)
		}
	}
	slices.Sort(gone)
	return deleteSightings(ctx, conn, set, e, gone)
}

// deleteSightings removes the entity rows of the tuples gone (cityHash64), then the
// owner's sightings: after the rows they found, so a run stopped half-way finds them
// again.
func deleteSightings(ctx context.Context, conn *ch.Conn, set tableset.Set, e entityOwner, gone []uint64) error {
	user := city.CH64([]byte(e.user))
	var mutations []ch.Mutation
	if len(gone) > 0 {
		mutations = append(mutations, ch.Mutation{Table: set.Name(graphEntities),
			Where: "org = ? AND namespace = ? AND cityHash64(user_id) = ? AND seq < ? AND has(?, " + sightedTuple + ")",
			Args:  []any{e.org, e.namespace, user, e.below, gone}})
	}
	mutations = append(mutations, ch.Mutation{Table: set.Name(graphSightings),
		Where: "org = ? AND namespace = ? AND cityHash64(user_id) = ? AND seq < ? AND (" + e.own + ")",
		Args:  append([]any{e.org, e.namespace, user, e.below}, e.ownArgs...)})
	for _, m := range mutations {
		if _, err := conn.Mutate(ctx, m); err != nil {
			return fmt.Errorf("erase the owner's sighted entities from %s: %w", m.Table, err)
		}
	}
	return nil
}

// spelling is a name (cityHash64 of its canonical form) as one record spelled it.
type spelling struct {
	name  uint64
	alias string
}

// ownTuples are the entity rows the owner's sightings hold below its record, as
// cityHash64 of the tuple, each with its spelling.
func ownTuples(ctx context.Context, conn *ch.Conn, set tableset.Set, e entityOwner) (map[uint64]spelling, error) {
	q := fmt.Sprintf(`SELECT DISTINCT %s, cityHash64(name), alias FROM %s WHERE org = ? AND namespace = ?
		AND cityHash64(user_id) = ? AND seq < ? AND (%s)`, sightedTuple, set.Qualified(graphSightings), e.own)
	args := append([]any{e.org, e.namespace, city.CH64([]byte(e.user)), e.below}, e.ownArgs...)
	rows, err := conn.Query(conn.Ctx(ctx), q, args...)
	if err != nil {
		return nil, fmt.Errorf("read the owner's entity sightings: %w", err)
	}
	defer rows.Close()
	out := map[uint64]spelling{}
	for rows.Next() {
		var tuple uint64
		var s spelling
		if err := rows.Scan(&tuple, &s.name, &s.alias); err != nil {
			return nil, fmt.Errorf("read the owner's entity sightings: %w", err)
		}
		out[tuple] = s
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the owner's entity sightings: %w", err)
	}
	return out, nil
}

// before is the owner restricted to its records below seq.
func (e entityOwner) before(seq uint64) entityOwner {
	e.own = "(" + e.own + ") AND seq < ?"
	e.ownArgs = append(slices.Clone(e.ownArgs), seq)
	return e
}
