package command

import (
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/userref"
)

// keyHeadsCheck is what a judged write's round took of its key's heads under every
// identity: their seqs, none when it predicted the key has no head (predictRound). The
// head lock checks the write's own identity's head; the others' (a proposal over
// another user's fact, another session's fact its row retires or owes a judgement)
// are checked here: the commit's first batch reads the seqs of the key's heads after
// the generation advance, whose lock every head write holds, and a plan whose key's
// heads are not those it was judged on is refused (errHeadMoved) and read again.
// A seq is a namespace's once, so equal seqs are the same revisions.
type keyHeadsCheck struct {
	key  string  // the memory key, clear
	seqs []int64 // ascending
}

// keyHeadsOf is the check of a write's key against the heads its round took of it.
func keyHeadsOf(key string, keyHeads []*memrow.Row) *keyHeadsCheck {
	c := &keyHeadsCheck{key: key}
	for _, h := range keyHeads {
		c.seqs = append(c.seqs, h.Seq)
	}
	slices.Sort(c.seqs)
	return c
}

// holds reports whether the key's heads, as the commit read them (seqs ascending), are
// those the plan was judged on, and no plan before it in the group writes the key.
func (c *keyHeadsCheck) holds(seqs []int64, writtenKeys map[string]bool) bool {
	return !writtenKeys[c.key] && slices.Equal(c.seqs, seqs)
}

// queueKeyHeads queues, on the commit's first batch after the generation advance, the
// read of the seqs of the heads of each plan's checked key (keyHeads) under every live
// key of the org (live, current first: while a rotation runs a head may be named under
// the retired one, and the round read those too); the answer is each plan's, filled
// when the batch is sent (nil: none, or not checked).
func queueKeyHeads(b *pgx.Batch, plans []*commitPlan, live []userref.Generation) ([][]int64, error) {
	out := make([][]int64, len(plans))
	var refs []string
	var of []int
	for i, p := range plans {
		if p.keyHeads == nil {
			continue
		}
		for _, g := range live {
			ref, err := events.KeyRef(g.Key, p.keyHeads.key)
			if err != nil {
				return nil, err
			}
			refs, of = append(refs, ref), append(of, i)
		}
	}
	switch len(refs) {
	case 0:
		return out, nil
	case 1:
		b.Queue(`SELECT array_agg(seq ORDER BY seq) FROM loom.memory_current WHERE org = $1 AND namespace = $2 AND memory_key = $3`,
			plans[0].org, plans[0].namespace, refs[0]).QueryRow(func(r pgx.Row) error { return r.Scan(&out[of[0]]) })
		return out, nil
	}
	// Each key an index probe (an aggregate keeps the lateral subquery from being
	// flattened into a join over the namespace's heads).
	b.Queue(`SELECT k.ord, m.seqs FROM unnest($3::text[]) WITH ORDINALITY AS k(memory_key, ord)
		CROSS JOIN LATERAL (SELECT array_agg(c.seq ORDER BY c.seq) AS seqs FROM loom.memory_current c
			WHERE c.org = $1 AND c.namespace = $2 AND c.memory_key = k.memory_key) m`,
		plans[0].org, plans[0].namespace, refs).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var ord int64
			var seqs []int64
			if err := rows.Scan(&ord, &seqs); err != nil {
				return err
			}
			// A key's references of several generations: its heads under each.
			i := of[ord-1]
			out[i] = append(out[i], seqs...)
		}
		for _, seqs := range out {
			slices.Sort(seqs)
		}
		return rows.Err()
	})
	return out, nil
}
