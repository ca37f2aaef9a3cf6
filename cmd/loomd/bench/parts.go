package bench

import (
	"context"
	"fmt"
	"time"
)

// partsTables are the tables the parts gate counts (docs/architecture.md).
var partsTables = []string{"memory", "memory_embeddings"}

// parts counts the new parts of loom.memory and loom.memory_embeddings while
// memory.set runs, against the parts gate (docs/architecture.md): at most
// 1000 / LOOM_PG_PUBLISH_INTERVAL_MS a second each, per serving process and month of
// created_at written.
//
// A part made by an insert takes the next block number of its table (merges take
// none), so the growth of the highest block number is the number of parts inserted,
// whatever merges did to them since. It is counted from the load's start until the
// projection has caught up with it, so every part the load caused is in the count.
func (r *runner) parts(ctx context.Context) (*ScenarioResult, error) {
	n := r.t.Process
	intervalMS := n.Cfg.Projector.Interval.Milliseconds()
	res := &ScenarioResult{
		Title: "new ClickHouse parts per second under the memory.set load",
		Baseline: fmt.Sprintf("the parts gate: 1000 / LOOM_PG_PUBLISH_INTERVAL_MS (%d ms) parts a second per table, "+
			"per serving process (here one) and month of created_at written", intervalMS),
		Notes: []string{"parts are counted as the growth of the table's highest block number (one per part an insert makes; " +
			"merges take none), from the load's start until the projection caught up with it"},
	}
	if intervalMS <= 0 {
		return nil, fmt.Errorf("LOOM_PG_PUBLISH_INTERVAL_MS is 0: the projector is unpaced and the gate has no value")
	}
	before := map[string]uint64{}
	for _, table := range partsTables {
		b, err := r.highestBlock(ctx, table)
		if err != nil {
			return nil, err
		}
		before[table] = b
	}
	const spaces = 32
	conc := r.levels(8)[0]
	prefix := r.namespace("parts")
	start := time.Now()
	load, err := r.setLoad(ctx, fmt.Sprintf("memory.set over %d namespaces", spaces), prefix, spaces, conc, 2*r.opts.Duration)
	if err != nil {
		return nil, err
	}
	for i := 0; i < spaces; i++ {
		if err := r.waitProjected(ctx, fmt.Sprintf("%s-%d", prefix, i)); err != nil {
			return nil, err
		}
	}
	window := time.Since(start)
	name := fmt.Sprintf("concurrency=%d, %.0f writes/s", conc, load.PerSecond)
	for _, table := range partsTables {
		after, err := r.highestBlock(ctx, table)
		if err != nil {
			return nil, err
		}
		months, err := r.partitionsSince(ctx, table, before[table])
		if err != nil {
			return nil, err
		}
		parts := float64(after - before[table])
		perSecond := round(parts/window.Seconds(), 2)
		gate := float64(1000) / float64(intervalMS) * float64(max(months, 1))
		// The gate's rate is an average that lets a second's worth of batches go at
		// once (the projector's pacer saves that much up while idle), so a window of
		// W seconds may hold (W + 1) seconds' worth.
		allowed := gate * (window.Seconds() + 1)
		row := res.add(name+", loom."+table, "new parts/s", perSecond, gate)
		row.Gate = fmt.Sprintf("≤ %g/s on average with a second's worth at once (at most %.0f parts in %.1f s): %s",
			gate, allowed, window.Seconds(), passFail(parts <= allowed))
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%d writes over %.1f s (the load, then the projection catching up)", load.Calls, window.Seconds()))
	res.Samples = append(res.Samples, CaseSamples{Case: name, Loom: load})
	return res, nil
}

// highestBlock is the highest block number among table's parts, active or merged away.
func (r *runner) highestBlock(ctx context.Context, table string) (uint64, error) {
	var b int64
	conn := r.t.Process.CH
	if err := conn.QueryRow(conn.Ctx(ctx), `SELECT toInt64(max(max_block_number)) FROM system.parts
		WHERE database = 'loom' AND table = ?`, table).Scan(&b); err != nil {
		return 0, fmt.Errorf("read the block numbers of loom.%s: %w", table, err)
	}
	return uint64(max(b, 0)), nil
}

// partitionsSince counts the partitions (months of created_at) of table that hold a
// block newer than block.
func (r *runner) partitionsSince(ctx context.Context, table string, block uint64) (int, error) {
	var parts uint64
	conn := r.t.Process.CH
	if err := conn.QueryRow(conn.Ctx(ctx), `SELECT uniqExact(partition) FROM system.parts
		WHERE database = 'loom' AND table = ? AND max_block_number > ?`, table, int64(block)).Scan(&parts); err != nil {
		return 0, fmt.Errorf("read the partitions of loom.%s: %w", table, err)
	}
	return int(parts), nil
}
