package projector

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/gapless"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/pg"
)

// settlement is what a batch writes to Postgres once ClickHouse holds its rows, in
// one transaction: its seqs and jumps for the watermarks, the records it could not
// apply, and (a repair) the failures it applied.
type settlement struct {
	seqs     map[nsKey][]int64
	jumps    map[nsKey]map[int64]bool
	failures []failure
	resolved map[nsKey][]int64
}

// advanceWatermarks settles a batch: it moves each namespace's watermark through the
// seqs of the batch that continue it without a gap, records the batch's failures,
// resolves the failures a repair applied, and notifies the barrier's listeners. A seq
// at or below the watermark is a redelivery. A seq past a gap is written to
// ClickHouse but does not move the watermark: the relay publishes a namespace's
// records again after any it could not publish, so the missing seq arrives, followed
// by the rest. A jump (an erasure's seq) moves the watermark to it over any gap: the
// seqs below it that have not arrived were withdrawn by the erasure and never will.
func advanceWatermarks(ctx context.Context, pool *pgxpool.Pool, projection string, st settlement) (advanced int, gaps []string, dupes int, err error) {
	if len(st.seqs) == 0 && len(st.failures) == 0 && len(st.resolved) == 0 {
		return 0, nil, 0, nil
	}
	keys := make([]nsKey, 0, len(st.seqs))
	for k := range st.seqs {
		keys = append(keys, k)
	}
	err = pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		current, err := readWatermarks(ctx, tx, projection, keys, true)
		if err != nil {
			return err
		}
		var orgs, nss []string
		var marks []int64
		for _, k := range keys {
			start := current[k]
			wm, n, d, gap := advance(start, st.seqs[k], st.jumps[k])
			advanced, dupes = advanced+n, dupes+d
			if gap {
				gaps = append(gaps, k.org+"/"+k.namespace)
			}
			if wm > start {
				orgs, nss, marks = append(orgs, k.org), append(nss, k.namespace), append(marks, wm)
			}
		}
		if err := recordFailures(ctx, tx, projection, st.failures); err != nil {
			return err
		}
		if err := resolveFailures(ctx, tx, projection, st.resolved); err != nil {
			return err
		}
		if len(marks) == 0 {
			return nil
		}
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO loom.projection_watermarks (projection, org, namespace, seq)
			SELECT $1, * FROM unnest($2::text[], $3::text[], $4::bigint[])
			ON CONFLICT (projection, org, namespace) DO UPDATE
			SET seq = GREATEST(loom.projection_watermarks.seq, EXCLUDED.seq), updated_at = now()`, projection, orgs, nss, marks)
		b.Queue(`SELECT pg_notify('loom_watermark', $1)`, projection)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("upsert watermarks: %w", err)
		}
		return nil
	})
	return advanced, gaps, dupes, err
}

// advance moves a watermark through a batch's seqs of one namespace (gapless.Advance).
var advance = gapless.Advance

// readWatermarks reads the batch's watermarks; lock takes their rows, so two
// projectors of one projection (a rebalance in flight) advance them one at a time.
func readWatermarks(ctx context.Context, q heads.Querier, projection string, keys []nsKey, lock bool) (map[nsKey]int64, error) {
	orgs, nss := splitKeys(keys)
	sql := `SELECT w.org, w.namespace, w.seq FROM loom.projection_watermarks w
		JOIN unnest($2::text[], $3::text[]) AS b(org, namespace) ON w.org = b.org AND w.namespace = b.namespace
		WHERE w.projection = $1
		ORDER BY w.org, w.namespace`
	if lock {
		sql += ` FOR UPDATE OF w`
	}
	rows, err := q.Query(ctx, sql, projection, orgs, nss)
	if err != nil {
		return nil, fmt.Errorf("read watermarks: %w", err)
	}
	defer rows.Close()
	out := map[nsKey]int64{}
	for rows.Next() {
		var k nsKey
		var seq int64
		if err := rows.Scan(&k.org, &k.namespace, &seq); err != nil {
			return nil, fmt.Errorf("read watermarks: %w", err)
		}
		out[k] = seq
	}
	return out, rows.Err()
}
