package erasure

import (
	"context"
	"fmt"
	"slices"

	"github.com/go-faster/city"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/tableset"
)

// namings is what the records no sighting records (older than the namespace's first)
// say of the entity rows they may have written: the names they named in a relation,
// whose spelling the history does not keep, and the spellings they declared, whose
// type it does not keep.
type namings struct {
	related  map[uint64]bool
	declared map[spelling]bool
}

// holds reports whether such a record may have written an entity row of s: it named
// the name in a relation, or declared the same spelling (of any type).
func (n namings) holds(s spelling) bool {
	return n.related[s.name] || n.declared[s]
}

// olderNamings reads what the records of the owner's user that keep an entity
// (e.other) below since say of names (cityHash64). A record named a name in a relation
// when its fact links hold it, or its pair links hold it and its history did not
// declare it (a proposal's relations make pairs and no fact).
func olderNamings(ctx context.Context, conn *ch.Conn, set tableset.Set, e entityOwner, since uint64, names []uint64) (namings, error) {
	out := namings{related: map[uint64]bool{}, declared: map[spelling]bool{}}
	args := append([]any{e.org, e.namespace, city.CH64([]byte(e.user)), since}, e.otherArgs...)
	where := " WHERE org = ? AND namespace = ? AND cityHash64(user_id) = ? AND seq < ? AND (" + e.other + ")"
	related, err := scanUint64s(ctx, conn, "SELECT DISTINCT cityHash64(arrayJoin([subject, object])) FROM "+set.Qualified(graphTripleOf)+where,
		args, "read the older records' relations")
	if err != nil {
		return namings{}, err
	}
	for _, h := range related {
		out.related[h] = true
	}
	paired, err := olderPairNames(ctx, conn, set, where, args, names)
	if err != nil {
		return namings{}, err
	}
	history := set.Qualified(versionsTable)
	err = eachDeclared(ctx, conn, "SELECT DISTINCT toUInt64(0), arrayJoin(entities) FROM "+history+where, args, func(_ uint64, s spelling) {
		out.declared[s] = true
	})
	if err != nil {
		return namings{}, err
	}
	if len(paired) == 0 {
		return out, nil
	}
	seqs := make([]uint64, 0, len(paired))
	for seq := range paired {
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	// What each paired record declared; the rest of the names it paired it named in a relation.
	err = eachDeclared(ctx, conn, "SELECT seq, arrayJoin(entities) FROM "+history+where+" AND has(?, seq)", append(slices.Clone(args), seqs),
		func(seq uint64, s spelling) { delete(paired[seq], s.name) })
	if err != nil {
		return namings{}, err
	}
	for _, hs := range paired {
		for h := range hs {
			out.related[h] = true
		}
	}
	return out, nil
}

// olderPairNames are, by seq, the names among names that the older records' pair
// links (where, binding args) hold.
func olderPairNames(ctx context.Context, conn *ch.Conn, set tableset.Set, where string, args []any, names []uint64) (map[uint64]map[uint64]bool, error) {
	q := "SELECT seq, cityHash64(entity_a), cityHash64(entity_b) FROM " + set.Qualified(graphEdgeOf) + where +
		" AND holds = 1 AND (has(?, cityHash64(entity_a)) OR has(?, cityHash64(entity_b)))"
	wanted := map[uint64]bool{}
	for _, h := range names {
		wanted[h] = true
	}
	out := map[uint64]map[uint64]bool{}
	err := conn.Each(conn.Ctx(ctx), q, append(slices.Clone(args), names, names), func(scan func(dest ...any) error) error {
		var seq, a, b uint64
		if err := scan(&seq, &a, &b); err != nil {
			return err
		}
		for _, h := range []uint64{a, b} {
			if wanted[h] {
				if out[seq] == nil {
					out[seq] = map[uint64]bool{}
				}
				out[seq][h] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the older records' pair links: %w", err)
	}
	return out, nil
}

// eachDeclared calls f with each (seq, declared spelling) a query of the history
// answers, the name in canonical form.
func eachDeclared(ctx context.Context, conn *ch.Conn, q string, args []any, f func(seq uint64, s spelling)) error {
	err := conn.Each(conn.Ctx(ctx), q, args, func(scan func(dest ...any) error) error {
		var seq uint64
		var alias string
		if err := scan(&seq, &alias); err != nil {
			return err
		}
		if canon := memrow.EntityName(alias); canon != "" {
			f(seq, spelling{name: city.CH64([]byte(canon)), alias: alias})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the older records' declared entities: %w", err)
	}
	return nil
}
