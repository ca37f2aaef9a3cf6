package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/loomplane/loom/client"
)

// getGateP50MS is the release gate on memory.get (docs/architecture.md): p50 at most 15 ms.
const getGateP50MS = 15

// get measures memory.get of random keys among GetRows memories beside a primary-key
// SELECT of the same head with pgx.
func (r *runner) get(ctx context.Context) (*ScenarioResult, error) {
	res := &ScenarioResult{
		Title:    "memory.get latency",
		Baseline: "a primary-key SELECT of the same head row (loom.memory_current, its key bound through loom.key_ref as memory.get binds it) with pgx, at the same concurrency",
		Notes:    []string{"the namespace is append_only: the load is written unjudged, and memory.get reads the head alone"},
	}
	ns := r.namespace("get")
	if err := r.appendOnly(ctx, ns); err != nil {
		return nil, err
	}
	if err := r.load(ctx, ns, r.opts.GetRows); err != nil {
		return nil, err
	}
	// One read checked in full first: the run must measure answers, not refusals.
	if got, err := r.api.Get(ctx, ns, loadKey(0), client.Identity{}, time.Time{}); err != nil || got.MemoryKey != loadKey(0) {
		return nil, fmt.Errorf("memory.get of %s answered %+v (err %v)", loadKey(0), got, err)
	}
	pool := r.t.Process.PG
	for _, conc := range r.levels(5) {
		name := fmt.Sprintf("%d memories, concurrency=%d", r.opts.GetRows, conc)
		rands := r.workerRands(conc)
		loom, err := r.closedLoop(ctx, "memory.get "+name, conc, r.opts.Duration, func(ctx context.Context, w, _ int) error {
			_, err := r.api.Get(ctx, ns, loadKey(rands[w].IntN(r.opts.GetRows)), client.Identity{}, time.Time{})
			return err
		})
		if err != nil {
			return nil, err
		}
		base, err := r.closedLoop(ctx, "primary-key SELECT "+name, conc, r.opts.Duration, func(ctx context.Context, w, _ int) error {
			var row []byte
			err := pool.QueryRow(ctx, `SELECT row FROM loom.memory_current WHERE org = $1 AND namespace = $2
				AND agent = '-' AND user_id = '-' AND session_id = '-' AND memory_key = (SELECT loom.key_ref($1, $3))`,
				r.t.Org, ns, loadKey(rands[w].IntN(r.opts.GetRows))).Scan(&row)
			if err != nil {
				return fmt.Errorf("primary-key SELECT: %w", err)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		p50 := res.compare(name, loom, base, "reads/s")
		p50.Gate = fmt.Sprintf("p50 ≤ %d ms: %s", getGateP50MS, passFail(loom.P50MS <= getGateP50MS))
	}
	return res, nil
}

func passFail(ok bool) string {
	if ok {
		return "pass"
	}
	return "FAIL"
}
