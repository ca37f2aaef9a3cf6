package atrest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/userref"
)

// An org's user reference key (loom.user_ref_keys) outlives erasures and KEK rotations:
// every reference an erased user left in a dead tuple, the WAL, a backup or an old
// topic segment confirms a guessed id to whoever holds the key. A rotation replaces it
// (issue 28, docs/architecture.md), as the name wrap key is replaced (namewrap.go):
//
//	(b) the swap: under the org's row lock the key becomes the retired one and a fresh
//	    key of the next generation the current one; then the rotation waits until no
//	    process can still be naming rows under the retired key (RetiredKeyWait);
//	(c) the rewrite: the mapping old reference -> new from the live clear values
//	    (refmap.go), every reference column rewritten through it a page range at a
//	    time (refrewrite.go), the turns' term hashes computed again under the new key
//	    (refterms.go), then a closing pass for rows a straggler named late;
//	(d) the republish of the org's records under the new generation (the caller's,
//	    as the command side builds them);
//	(e) the retired key and the mapping dropped.
//
// Every step is idempotent and a run finds where an earlier one stopped: a swap done
// (retired set) is not done again, the mapping is rebuilt from the same clear values
// and the rewrite only touches references still under the retired key.

// RefRotation is what a rotation of one org's key did.
type RefRotation struct {
	Org       string
	Gen       int              // the generation now current
	Resumed   bool             // an earlier run had swapped the key already
	Mapped    int64            // references the mapping holds
	Rewritten map[string]int64 // rows rewritten, by table
	Deleted   map[string]int64 // rows deleted, by table (see refrewrite.go)
	Unmapped  map[string]int64 // rows still naming a reference no live clear value maps, by table: left
	Rehashed  int64            // turns whose term hashes were computed again
}

// RefRotationOptions are a rotation's settings.
type RefRotationOptions struct {
	// Wait is how long the swap is waited out; RetiredKeyWait when zero.
	Wait time.Duration
	// Republish re-creates the org's topic records under the current generation (step
	// d); nil skips it (and the caller says so).
	Republish func(ctx context.Context, org string) error
	// StopAfterSwap ends the run after the swap, as a crash there would: for a test
	// of resumption.
	StopAfterSwap bool
}

// RetiredKeyWait is how long after a swap a process may still start a commit naming
// rows under the retired key (userref.StaleLimit: a copy read just before the swap is
// answered until it is that old), plus the longest such commit may run
// (admissionDeadline, LOOM_PG_ADMISSION_DEADLINE_MS).
func RetiredKeyWait(admissionDeadline time.Duration) time.Duration {
	return userref.StaleLimit + admissionDeadline
}

// ErrNoRefKey is a rotation of an org that has no user reference key.
var ErrNoRefKey = errors.New("the org has no user reference key")

// ErrRotationRunning is a rotation of an org another process is rotating.
var ErrRotationRunning = errors.New("another process is rotating the org's user reference key")

// RotateRefKey rotates org's user reference key, finishing first a rotation an
// earlier run left half done.
func RotateRefKey(ctx context.Context, pool *pgxpool.Pool, ring *kek.Ring, org string, opts RefRotationOptions) (RefRotation, error) {
	rs, err := rotateRefKeys(ctx, pool, ring, []string{org}, opts)
	if err == nil && len(rs) == 0 {
		// Not locked: another process holds the org's rotation.
		err = ErrRotationRunning
	}
	if len(rs) == 0 {
		return RefRotation{Org: org}, err
	}
	return rs[0], err
}

// abandonedAfter is how long after its swap the at-rest pass takes a rotation as
// abandoned by the process that made it (and finishes it); far past the wait and the
// rewrite of an org of ordinary size.
const abandonedAfter = 10 * time.Minute

// RotateRefKeys rotates the user reference key of every org whose key is wrapped under
// a KEK the ring holds but not its first (a KEK rotation replaces such a key rather
// than wrap it again), and finishes every rotation swapped more than abandonedAfter
// ago. An org another process is rotating is left to it.
func RotateRefKeys(ctx context.Context, pool *pgxpool.Pool, ring *kek.Ring, opts RefRotationOptions) ([]RefRotation, error) {
	rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT k.org FROM loom.user_ref_keys k
		WHERE (k.retired IS NULL AND octet_length(k.key) = %d AND substring(k.key FROM 2 FOR 8) <> $1 AND loom.opens(k.key))
		   OR EXISTS (SELECT 1 FROM loom.ref_rotations r WHERE r.org = k.org AND r.swapped_at < now() - make_interval(secs => $2))
		ORDER BY k.org`, kek.WrappedSize), ring.CurrentID(), abandonedAfter.Seconds())
	if err != nil {
		return nil, fmt.Errorf("find the user reference keys under a retired KEK: %w", err)
	}
	orgs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(orgs) == 0 {
		return nil, err
	}
	return rotateRefKeys(ctx, pool, ring, orgs, opts)
}

// rotateRefKeys swaps the key of each of orgs this process can lock (an advisory lock
// held on one connection until the end, so two processes never rotate one org at
// once), waits once for them all, then rewrites, republishes and drops each.
func rotateRefKeys(ctx context.Context, pool *pgxpool.Pool, ring *kek.Ring, orgs []string, opts RefRotationOptions) ([]RefRotation, error) {
	if err := nameWrapsFirst(ctx, pool, ring); err != nil {
		return nil, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		// A connection that failed is closed rather than released holding its locks.
		if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock_all()`); err != nil {
			conn.Conn().Close(context.Background())
		}
		conn.Release()
	}()
	var rs []RefRotation
	var skipped []error
	for _, org := range orgs {
		if err := underOrgDerivedWrap(ctx, pool, org); err != nil {
			skipped = append(skipped, err)
			continue
		}
		var locked bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended('loom.ref_rotation:' || $1, 0))`, org).Scan(&locked); err != nil {
			return rs, fmt.Errorf("lock the rotation of %s: %w", org, err)
		}
		if !locked {
			continue
		}
		r := RefRotation{Org: org, Rewritten: map[string]int64{}, Deleted: map[string]int64{}, Unmapped: map[string]int64{}}
		if r.Gen, r.Resumed, err = swapRefKey(ctx, pool, ring, org); err != nil {
			return rs, fmt.Errorf("swap the user reference key of %s: %w", org, err)
		}
		rs = append(rs, r)
	}
	if opts.StopAfterSwap || len(rs) == 0 {
		return rs, errors.Join(skipped...)
	}
	wait := opts.Wait
	if wait == 0 {
		wait = RetiredKeyWait(0)
	}
	select {
	case <-ctx.Done():
		return rs, ctx.Err()
	case <-time.After(wait):
	}
	for i := range rs {
		if err := finishRefRotation(ctx, pool, ring, &rs[i], opts); err != nil {
			return rs, err
		}
	}
	return rs, errors.Join(skipped...)
}

// finishRefRotation rewrites, republishes and drops the retired key of a rotation
// whose swap was waited out.
func finishRefRotation(ctx context.Context, pool *pgxpool.Pool, ring *kek.Ring, r *RefRotation, opts RefRotationOptions) error {
	org := r.Org
	var err error
	if r.Mapped, err = buildRefMap(ctx, pool, org); err != nil {
		return fmt.Errorf("map the references of %s: %w", org, err)
	}
	// The rewrite, then a closing pass: a straggler past the wait is not expected, but
	// a row it named would be found by no lookup once the retired key is gone.
	for pass := 0; pass < 2; pass++ {
		if err := rewriteRefs(ctx, pool, org, r); err != nil {
			return fmt.Errorf("rewrite the references of %s: %w", org, err)
		}
	}
	if r.Rehashed, err = rehashTerms(ctx, pool, ring, org); err != nil {
		return fmt.Errorf("hash the turns' terms of %s again: %w", org, err)
	}
	if err := countUnmapped(ctx, pool, org, r); err != nil {
		return fmt.Errorf("count the references of %s left under the retired key: %w", org, err)
	}
	if opts.Republish != nil {
		if err := opts.Republish(ctx, org); err != nil {
			return fmt.Errorf("republish the records of %s: %w", org, err)
		}
	}
	if err := dropRetiredRefKey(ctx, pool, org); err != nil {
		return fmt.Errorf("drop the retired user reference key of %s: %w", org, err)
	}
	return nil
}

// nameWrapsFirst wraps under a name wrap key of generation >= 1 every user key still
// under the one derived from its org's user reference key (generation 0, migration
// 156): a swap replaces that key, and a key under it would open no more.
func nameWrapsFirst(ctx context.Context, pool *pgxpool.Pool, ring *kek.Ring) error {
	c := Counts{Wrapped: map[string]int64{}, Unopenable: map[string]int64{}}
	if err := renewNameWraps(ctx, pool, ring, c); err != nil {
		return fmt.Errorf("wrap the user keys under a name wrap key first: %w", err)
	}
	return nil
}

// underOrgDerivedWrap fails when org still has user keys wrapped under the key derived
// from its user reference key (the name wrap key of generation 0).
func underOrgDerivedWrap(ctx context.Context, pool *pgxpool.Pool, org string) error {
	var n int64
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM loom.user_names WHERE org = $1 AND wrap = 0)
		+ (SELECT count(*) FROM loom.erasure_ledger WHERE org = $1 AND scope ? 'user_key'
			AND coalesce((scope->>'user_wrap')::int, 0) = 0)`, org).Scan(&n); err != nil {
		return fmt.Errorf("count the user keys of %s under the org-derived wrap key: %w", org, err)
	}
	if n > 0 {
		return fmt.Errorf("%d user keys of %s are still wrapped under the key derived from its user reference key "+
			"(no KEK of this process opens the org's name wrap key): not rotating it", n, org)
	}
	return nil
}

// swapRefKey makes a fresh key org's current one and keeps the current as retired,
// unless a rotation has one retired already (then it answers the current generation,
// resumed).
func swapRefKey(ctx context.Context, pool *pgxpool.Pool, ring *kek.Ring, org string) (gen int, resumed bool, err error) {
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var retired bool
		if err := tx.QueryRow(ctx, `SELECT gen, retired IS NOT NULL FROM loom.user_ref_keys WHERE org = $1 FOR UPDATE`, org).
			Scan(&gen, &retired); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return ErrNoRefKey
			}
			return err
		}
		if retired {
			resumed = true
			return nil
		}
		_, fresh, err := kek.NewKey(ring)
		if err != nil {
			return err
		}
		gen++
		if _, err = tx.Exec(ctx, `UPDATE loom.user_ref_keys SET retired = key, retired_gen = gen, key = $2, gen = gen + 1 WHERE org = $1`,
			org, fresh); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO loom.ref_rotations (org) VALUES ($1) ON CONFLICT (org) DO UPDATE SET swapped_at = now()`, org)
		return err
	})
	return gen, resumed, err
}

// dropRetiredRefKey forgets the retired key and the mapping: what the retired key
// named is then opened by no key anyone holds once the KEK it was wrapped under goes.
func dropRetiredRefKey(ctx context.Context, pool *pgxpool.Pool, org string) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM loom.ref_rotation_map WHERE org = $1`, org); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM loom.ref_rotations WHERE org = $1`, org); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE loom.user_ref_keys SET retired = NULL, retired_gen = NULL WHERE org = $1`, org)
		return err
	})
}
