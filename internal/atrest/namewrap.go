package atrest

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/kek"
)

// The orgs' name wrap keys (loom.name_wrap_keys, migration 158) wrap the users' keys
// (loom.user_names.key) and the erasure sagas' (the ledger scope's user_key). They are
// not wrapped again at a rotation as the other data keys are, but replaced: a key
// not under the ring's first KEK gives way to a fresh one, every key wrapped under it
// is wrapped again under the fresh one, and then it is dropped. A copy of an erased
// user's sealed name and wrapped key kept in the WAL or a backup then opens only under
// the old name wrap key, whose own kept copies are wrapped under the old KEK: once the
// old KEK is destroyed, no key anyone holds opens them.
//
// A swap waits for the transactions that are wrapping a key under the old one
// (loom.locked_name_wrap locks the org's row), so the rewrap that follows sees every
// key still under it, and the old key is dropped only when none is.

// wrappedTables hold keys wrapped under a name wrap key: each row's generation
// (stale), and how its key is wrapped again under the org's current one (w).
var wrappedTables = []struct{ table, stale, rewrap string }{
	{"loom.user_names", `t.wrap`,
		`key = loom.wrapped_under(loom.unwrapped_user_key(t.org, t.key, t.wrap), loom.unwrapped_key(w.key)), wrap = w.gen`},
	{"loom.erasure_ledger", `coalesce((t.scope->>'user_wrap')::int, 0)`,
		`scope = t.scope || jsonb_build_object('user_wrap', w.gen, 'user_key', encode(loom.wrapped_under(
			loom.unwrapped_user_key(t.org, decode(t.scope->>'user_key', 'hex'), coalesce((t.scope->>'user_wrap')::int, 0)),
			loom.unwrapped_key(w.key)), 'hex'))`},
}

// renewNameWraps makes the name wrap key of each org that has none, replaces each not
// under the ring's first KEK, and wraps again every key under a replaced one (or under
// migration 156's org-derived key). A rotation an earlier pass left half done is
// finished first.
func renewNameWraps(ctx context.Context, pool *pgxpool.Pool, ring *kek.Ring, c Counts) error {
	err := walk(ctx, pool, "loom.user_ref_keys", func(from, to pgtype.TID) error {
		n, err := makeNameWraps(ctx, pool, ring, from, to)
		c.Wrapped["loom.name_wrap_keys"] += n
		return err
	})
	if err != nil {
		return fmt.Errorf("make the name wrap keys: %w", err)
	}
	if err := rewrapNames(ctx, pool, c); err != nil {
		return err
	}
	var swapped int64
	err = walk(ctx, pool, "loom.name_wrap_keys", func(from, to pgtype.TID) error {
		n, u, err := swapNameWraps(ctx, pool, ring, from, to)
		swapped += n
		c.Wrapped["loom.name_wrap_keys"] += n
		c.Unopenable["loom.name_wrap_keys"] += u
		return err
	})
	if err != nil {
		return fmt.Errorf("replace the name wrap keys: %w", err)
	}
	if swapped > 0 {
		if err := rewrapNames(ctx, pool, c); err != nil {
			return err
		}
	}
	for _, t := range wrappedTables {
		n, err := countRows(ctx, pool, fmt.Sprintf(`SELECT count(*) FROM %s t JOIN loom.name_wrap_keys w ON w.org = t.org
			WHERE %s <> w.gen%s`, t.table, t.stale, userKeyOnly(t.table)))
		if err != nil {
			return err
		}
		c.Unopenable[t.table] += n
	}
	return nil
}

// userKeyOnly narrows the ledger to the scopes that seal a user.
func userKeyOnly(table string) string {
	if table == "loom.erasure_ledger" {
		return ` AND t.scope ? 'user_key'`
	}
	return ""
}

func countRows(ctx context.Context, pool *pgxpool.Pool, q string) (n int64, err error) {
	err = pool.QueryRow(ctx, q).Scan(&n)
	return n, err
}

// rewrapNames wraps again, under its org's current name wrap key, every key under
// another that this session can open, then drops each retired key no key is under.
func rewrapNames(ctx context.Context, pool *pgxpool.Pool, c Counts) error {
	for _, t := range wrappedTables {
		err := walk(ctx, pool, t.table, func(from, to pgtype.TID) error {
			tag, err := pool.Exec(ctx, fmt.Sprintf(`UPDATE %[1]s t SET %[3]s FROM loom.name_wrap_keys w
				WHERE t.ctid >= $1 AND t.ctid < $2 AND w.org = t.org AND %[2]s <> w.gen%[4]s
				  AND loom.opens(w.key) AND loom.name_wrap_opens(t.org, %[2]s)`, t.table, t.stale, t.rewrap, userKeyOnly(t.table)),
				from, to)
			c.Wrapped[t.table] += tag.RowsAffected()
			return err
		})
		if err != nil {
			return fmt.Errorf("wrap the keys of %s again: %w", t.table, err)
		}
	}
	_, err := pool.Exec(ctx, `UPDATE loom.name_wrap_keys w SET retired = NULL, retired_gen = NULL
		WHERE w.retired IS NOT NULL
		  AND NOT EXISTS (SELECT 1 FROM loom.user_names n WHERE n.org = w.org AND n.wrap = w.retired_gen)
		  AND NOT EXISTS (SELECT 1 FROM loom.erasure_ledger l WHERE l.org = w.org AND l.scope ? 'user_key'
			AND coalesce((l.scope->>'user_wrap')::int, 0) = w.retired_gen)`)
	if err != nil {
		return fmt.Errorf("drop the retired name wrap keys: %w", err)
	}
	return nil
}

// makeNameWraps makes a name wrap key for each org of a page range of
// loom.user_ref_keys that has none.
func makeNameWraps(ctx context.Context, pool *pgxpool.Pool, ring *kek.Ring, from, to pgtype.TID) (int64, error) {
	rows, err := pool.Query(ctx, `SELECT k.org FROM loom.user_ref_keys k WHERE k.ctid >= $1 AND k.ctid < $2
		AND NOT EXISTS (SELECT 1 FROM loom.name_wrap_keys w WHERE w.org = k.org)`, from, to)
	if err != nil {
		return 0, err
	}
	orgs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(orgs) == 0 {
		return 0, err
	}
	keys := make([][]byte, len(orgs))
	for i := range orgs {
		if _, keys[i], err = kek.NewKey(ring); err != nil {
			return 0, err
		}
	}
	tag, err := pool.Exec(ctx, `INSERT INTO loom.name_wrap_keys (org, gen, key)
		SELECT org, 1, key FROM unnest($1::text[], $2::bytea[]) AS v(org, key) ON CONFLICT (org) DO NOTHING`, orgs, keys)
	return tag.RowsAffected(), err
}

// swapNameWraps replaces, in a page range of loom.name_wrap_keys, each key not under
// the ring's first KEK (and not still being replaced) by a fresh one, keeping it as
// retired. A key the ring does not open is counted and left: what it wraps could not
// be wrapped again.
func swapNameWraps(ctx context.Context, pool *pgxpool.Pool, ring *kek.Ring, from, to pgtype.TID) (swapped, unopenable int64, err error) {
	rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT org, key FROM loom.name_wrap_keys
		WHERE ctid >= $1 AND ctid < $2 AND retired IS NULL
		  AND NOT (octet_length(key) = %d AND substring(key FROM 2 FOR 8) = $3)`, kek.WrappedSize), from, to, ring.CurrentID())
	if err != nil {
		return 0, 0, err
	}
	type found struct {
		org string
		key []byte
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (found, error) {
		var f found
		return f, r.Scan(&f.org, &f.key)
	})
	if err != nil || len(keys) == 0 {
		return 0, 0, err
	}
	var orgs []string
	var olds, news [][]byte
	for _, f := range keys {
		if _, err := ring.Unwrap(f.key); err != nil {
			unopenable++
			continue
		}
		_, fresh, err := kek.NewKey(ring)
		if err != nil {
			return 0, unopenable, err
		}
		orgs, olds, news = append(orgs, f.org), append(olds, f.key), append(news, fresh)
	}
	if len(orgs) == 0 {
		return 0, unopenable, nil
	}
	tag, err := pool.Exec(ctx, `UPDATE loom.name_wrap_keys w SET retired = w.key, retired_gen = w.gen, key = v.new, gen = w.gen + 1,
			renewed_at = now()
		FROM unnest($1::text[], $2::bytea[], $3::bytea[]) AS v(org, old, new)
		WHERE w.org = v.org AND w.key = v.old AND w.retired IS NULL`, orgs, olds, news)
	if err != nil {
		return 0, unopenable, err
	}
	return tag.RowsAffected(), unopenable, nil
}
