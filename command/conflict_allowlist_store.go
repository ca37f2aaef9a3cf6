package command

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/erasure"
)

// The statements of loom.conflict_allowlist (migration 141): the pairs of a namespace's
// memories its writers said are neither in conflict nor duplicates. The list is read
// with the namespace's policy (queuePolicy) and changed as a policy change is.

const conflictAllowlistTable = "loom.conflict_allowlist"

// allowedPair is one allowlisted pair, its ids in order (a < b).
type allowedPair struct {
	a, b    uuid.UUID
	addedBy string
	addedAt time.Time
}

// queueAllowlist queues the read of a namespace's allowlisted pairs on b, into p.
func queueAllowlist(b *pgx.Batch, org, ns string, p *policy) {
	b.Queue(`SELECT memory_a, memory_b FROM loom.conflict_allowlist WHERE org = $1 AND namespace = $2`, org, ns).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var a, b uuid.UUID
				if err := rows.Scan(&a, &b); err != nil {
					return err
				}
				if p.allowed == nil {
					p.allowed = map[[2]uuid.UUID]struct{}{}
				}
				p.allowed[[2]uuid.UUID{a, b}] = struct{}{}
			}
			return rows.Err()
		})
}

// insertAllowedPair adds a pair (a < b) with the users of its two rows and the
// namespace's generation (seq) now; it reports whether the pair is new, and how many
// pairs the namespace holds with it.
func insertAllowedPair(ctx context.Context, tx pgx.Tx, org, ns string, a, b uuid.UUID, users []string, seq int64, actor string) (bool, int, error) {
	tag, err := tx.Exec(ctx, `INSERT INTO loom.conflict_allowlist (org, namespace, memory_a, memory_b, user_ids, seq, added_by)
		VALUES ($1, $2, $3, $4, ARRAY(SELECT loom.named_user($1, u) FROM unnest($5::text[]) AS u), $6, $7) ON CONFLICT DO NOTHING`,
		org, ns, a, b, users, seq, actor)
	if err != nil {
		return false, 0, err
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM loom.conflict_allowlist WHERE org = $1 AND namespace = $2`, org, ns).Scan(&n); err != nil {
		return false, 0, err
	}
	return tag.RowsAffected() > 0, n, nil
}

// deleteAllowedPair removes a pair (a < b); it reports whether it was listed.
func deleteAllowedPair(ctx context.Context, tx pgx.Tx, org, ns string, a, b uuid.UUID) (bool, error) {
	tag, err := tx.Exec(ctx, `DELETE FROM loom.conflict_allowlist WHERE org = $1 AND namespace = $2 AND memory_a = $3 AND memory_b = $4`,
		org, ns, a, b)
	return tag.RowsAffected() > 0, err
}

// listAllowedPairs reads a namespace's pairs, oldest first; a token bound to one user
// (readUserID) sees the pairs of its user's rows alone.
func (s *Service) listAllowedPairs(ctx context.Context, org, ns, readUserID string) ([]allowedPair, error) {
	rows, err := s.pool.Query(ctx, `SELECT memory_a, memory_b, added_by, added_at FROM loom.conflict_allowlist
		WHERE org = $1 AND namespace = $2 AND ($3 = '' OR user_ids <@ ARRAY[(SELECT loom.user_ref($1, $3))])
		ORDER BY added_at, memory_a, memory_b`, org, ns, readUserID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (allowedPair, error) {
		var p allowedPair
		err := r.Scan(&p.a, &p.b, &p.addedBy, &p.addedAt)
		return p, err
	})
}

// PairAllowlisted reports, in a commit's transaction, whether two memories of a
// namespace are an allowlisted pair: the conflict resolver's last check before it
// flags or retires one against the other (a policy change holds the policy lock the
// commit holds shared, so the read sees every change committed before it).
func PairAllowlisted(ctx context.Context, tx pgx.Tx, org, ns, x, y string) (bool, error) {
	a, b, err := orderedPair(x, y)
	if err != nil {
		return false, nil // not two memory ids: no pair of the list
	}
	var listed bool
	err = tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM loom.conflict_allowlist
		WHERE org = $1 AND namespace = $2 AND memory_a = $3 AND memory_b = $4)`, org, ns, a, b).Scan(&listed)
	return listed, err
}

// eraseAllowedPairs deletes the pairs of an erasure's scope (args as
// erasure.ScopeParams names them).
func eraseAllowedPairs(ctx context.Context, tx pgx.Tx, args []any) (int64, error) {
	tag, err := tx.Exec(ctx, erasure.ScopeParams+` DELETE FROM loom.conflict_allowlist t USING p WHERE `+pgScope(conflictAllowlistTable), args...)
	return tag.RowsAffected(), err
}
