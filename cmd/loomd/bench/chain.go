package bench

import (
	"context"
	"fmt"
	"time"
)

// chain measures memory.set with the audit chain on against the same load with it off,
// in one run (issue 33's figure: set p50 on vs off within 1.1×). The chain is linked by
// the projector (each batch hashes its rows after the namespace's last row hash, which
// the projector kept from its batch before or reads from ClickHouse), not on the write
// path, so what it can cost a write is the
// projector's share of the machine while the writes run. Off, the projector writes
// the rows with empty hashes (app.Process.SetAuditChain); the run turns the chain back
// on when it ends, and verifying its namespaces' chains afterwards fails by design.
func (r *runner) chain(ctx context.Context) (*ScenarioResult, error) {
	res := &ScenarioResult{
		Title:    "memory.set with the audit chain on vs off",
		Baseline: "the same memory.set load, in fresh namespaces, with the projector writing the audit rows unlinked (no hash read, no hashing)",
		Notes: []string{"Loom is the chain on; the ratio is on/off. The projector runs in the process under test, " +
			"so its chaining competes with the writes for the same cores"},
	}
	p := r.t.Process
	defer p.SetAuditChain(true)
	// An unmeasured load first: the run's first side otherwise pays the process's
	// warming up (pools, caches, the index's first namespaces), which fell on the
	// chain-on side of the first case: in six runs before this, that case's loomd CPU
	// per write was 1.10–1.29× its other side's in five (0.98 in one), the off-first
	// case's 0.82–1.11×.
	warm := min(r.opts.Duration/2, 5*time.Second)
	if _, err := r.setLoad(ctx, "memory.set warm-up", r.namespace("chain", "warm"), 1, 1, warm); err != nil {
		return nil, err
	}
	if err := r.waitProjected(ctx, r.namespace("chain", "warm")+"-0"); err != nil {
		return nil, err
	}
	for _, conc := range r.levels(1, 8) {
		// Each level runs twice, on first and then off first, and each case as
		// on-off-off-on (or off-on-on-off), half the duration a side: the first pair of
		// orders cancels a drift in the machine's load that grows linearly over the run,
		// the mirrored halves one that accelerates (tables and parts growing side after
		// side), which otherwise lands on whichever side runs last.
		var both [2][]chainSide // the level's on and off sides, both orders
		for _, onFirst := range []bool{true, false} {
			name := fmt.Sprintf("concurrency=%d, %s first", conc, map[bool]string{true: "on", false: "off"}[onFirst])
			var ons, offs []chainSide
			for i, chain := range []bool{onFirst, !onFirst, !onFirst, onFirst} {
				side, err := r.chainSide(ctx, chain, conc, name, r.namespace("chain", fmt.Sprint(chain), fmt.Sprint(conc), fmt.Sprint(onFirst), fmt.Sprint(i)))
				if err != nil {
					return nil, err
				}
				if chain {
					ons = append(ons, side)
				} else {
					offs = append(offs, side)
				}
			}
			on, off := meanSide(ons), meanSide(offs)
			both[0], both[1] = append(both[0], ons...), append(both[1], offs...)
			res.compare(name, on.sample, off.sample, "writes/s")
			res.add(name, "CPU ms per write, loomd", on.cpu.self.Seconds()*1000, off.cpu.self.Seconds()*1000)
			res.add(name, "CPU ms per write, loomd + stores", on.cpu.tree.Seconds()*1000, off.cpu.tree.Seconds()*1000)
		}
		on, off := meanSide(both[0]), meanSide(both[1])
		name := fmt.Sprintf("concurrency=%d, both orders", conc)
		res.add(name, "p50 ms (mean of the sides' p50s)", on.sample.P50MS, off.sample.P50MS)
		res.add(name, "CPU ms per write, loomd + stores", on.cpu.tree.Seconds()*1000, off.cpu.tree.Seconds()*1000)
	}
	res.Notes = append(res.Notes, "CPU per write is the CPU time used from the load's start until the projection holds its "+
		"last write, over the writes: loomd is this process (the API, the relay, the projector and the benchmark's own client), "+
		"loomd + stores adds every process under it (the embedded Postgres and ClickHouse), read from /proc at 10 ms a tick; "+
		"unlike the latencies it barely moves with the machine's other load")
	return res, nil
}

// chainSide is one side of a chain case: the load's latencies, and the CPU it took per
// write, the projector's catching up included.
type chainSide struct {
	sample Sample
	cpu    cpuUse
}

// chainSide runs the memory.set load with the chain on or off into prefix-0 and waits
// until the projection holds it before switching again, so every row is chained (or
// not) as its side says.
func (r *runner) chainSide(ctx context.Context, chain bool, conc int, name, prefix string) (chainSide, error) {
	r.t.Process.SetAuditChain(chain)
	before := readCPU()
	s, err := r.setLoad(ctx, fmt.Sprintf("memory.set chain=%v %s", chain, name), prefix, 1, conc, max(r.opts.Duration/2, 100*time.Millisecond))
	if err != nil {
		return chainSide{}, err
	}
	if err := r.waitProjected(ctx, prefix+"-0"); err != nil {
		return chainSide{}, err
	}
	used := readCPU().sub(before)
	if s.Calls > 0 {
		used.self /= time.Duration(s.Calls)
		used.tree /= time.Duration(s.Calls)
	}
	return chainSide{sample: s, cpu: used}, nil
}

// meanSide is one side of a case from its runs: the latencies' and the CPU's means, the
// calls and seconds summed (the rate over them) and the worst max.
func meanSide(runs []chainSide) chainSide {
	var out chainSide
	n := float64(len(runs))
	for _, r := range runs {
		s := r.sample
		out.sample.Concurrency = s.Concurrency
		out.sample.Calls += s.Calls
		out.sample.Errors += s.Errors
		out.sample.Seconds += s.Seconds
		out.sample.P50MS += s.P50MS / n
		out.sample.P99MS += s.P99MS / n
		out.sample.MaxMS = max(out.sample.MaxMS, s.MaxMS)
		out.cpu.self += r.cpu.self / time.Duration(len(runs))
		out.cpu.tree += r.cpu.tree / time.Duration(len(runs))
	}
	if out.sample.Seconds > 0 {
		out.sample.PerSecond = float64(out.sample.Calls) / out.sample.Seconds
	}
	return out
}
