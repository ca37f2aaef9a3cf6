package projector

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/gapless"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/watermarks"
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
	advanced, gaps, dupes, _, err = settleWatermarks(ctx, pool, projection, st)
	return advanced, gaps, dupes, err
}

// settledMark is where a batch found a namespace's watermark, under its lock, and
// where it left it.
type settledMark struct{ from, to int64 }

// settleWatermarks is advanceWatermarks, also returning each namespace's settledMark.
func settleWatermarks(ctx context.Context, pool *pgxpool.Pool, projection string, st settlement) (advanced int, gaps []string, dupes int,
	settled map[nsKey]settledMark, err error) {
	if len(st.seqs) == 0 && len(st.failures) == 0 && len(st.resolved) == 0 {
		return 0, nil, 0, nil, nil
	}
	settled = map[nsKey]settledMark{}
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
			settled[k] = settledMark{from: start, to: max(start, wm)}
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
		watermarks.QueueRaise(b, projection, orgs, nss, marks)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("upsert watermarks: %w", err)
		}
		return nil
	})
	if err != nil {
		settled = nil
	}
	return advanced, gaps, dupes, settled, err
}

// advance moves a watermark through a batch's seqs of one namespace (gapless.Advance).
var advance = gapless.Advance

// readWatermarks reads the batch's watermarks; lock takes their rows, so two
// projectors of one projection (a rebalance in flight) advance them one at a time.
func readWatermarks(ctx context.Context, q heads.Querier, projection string, keys []nsKey, lock bool) (map[nsKey]int64, error) {
	orgs, nss := splitKeys(keys)
	marks, err := watermarks.ReadKeys(ctx, q, projection, orgs, nss, lock)
	if err != nil {
		return nil, err
	}
	out := make(map[nsKey]int64, len(marks))
	for k, seq := range marks {
		out[nsKey{org: k.Org, namespace: k.Namespace}] = seq
	}
	return out, nil
}
