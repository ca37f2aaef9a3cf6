package bench

import (
	"context"
	"fmt"
)

// setKeyedCase measures memory.set sent with an Idempotency-Key, a fresh one per call,
// into one namespace at conc, beside the raw commit the unkeyed case measured (base):
// what the key's claim and stored answer add to a write (--set-keyed).
func (r *runner) setKeyedCase(ctx context.Context, res *ScenarioResult, raw *rawCommitter, base Sample, conc int) error {
	name := fmt.Sprintf("namespaces=1 concurrency=%d keyed", conc)
	wal := walMeter{pool: raw.pool}
	wal.mark(ctx)
	cost := r.costMark(r.t.RoundTrips)
	census := r.t.RoundTrips.Census()
	prefix := r.namespace("setkeyed", fmt.Sprint(conc))
	keyed, err := r.setLoadKeyed(ctx, "memory.set "+name, prefix, 1, conc, r.opts.Duration, true)
	if err != nil {
		return err
	}
	wal.drainOutbox(ctx)
	keyedWAL := wal.mark(ctx)
	if err := r.waitSpacesProjected(ctx, raw.pool, prefix, 1); err != nil {
		return err
	}
	spent := cost.since(r)
	writeCensus(r.opts.Progress, "memory.set "+name, census, r.t.RoundTrips.Census(), keyed.Calls)
	res.compare(name, keyed, base, "writes/s")
	if keyed.Calls == 0 {
		return nil
	}
	if wal.err == nil {
		res.alone(name, "WAL bytes/write", round(keyedWAL/float64(keyed.Calls), 0))
	}
	res.alone(name, "Postgres round trips/write", spent.per(keyed.Calls).trips)
	return nil
}
