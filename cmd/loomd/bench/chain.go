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
		// Each level runs twice, on first and then off first, so a drift in the
		// machine's load over the run weighs on both sides.
		for _, onFirst := range []bool{true, false} {
			name := fmt.Sprintf("concurrency=%d, %s first", conc, map[bool]string{true: "on", false: "off"}[onFirst])
			var on, off chainSide
			for _, chain := range []bool{onFirst, !onFirst} {
				side, err := r.chainSide(ctx, chain, conc, name, r.namespace("chain", fmt.Sprint(chain), fmt.Sprint(conc), fmt.Sprint(onFirst)))
				if err != nil {
					return nil, err
				}
				if chain {
					on = side
				} else {
					off = side
				}
			}
			res.compare(name, on.sample, off.sample, "writes/s")
			res.add(name, "CPU ms per write, loomd", on.cpu.self.Seconds()*1000, off.cpu.self.Seconds()*1000)
			res.add(name, "CPU ms per write, loomd + stores", on.cpu.tree.Seconds()*1000, off.cpu.tree.Seconds()*1000)
		}
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
	s, err := r.setLoad(ctx, fmt.Sprintf("memory.set chain=%v %s", chain, name), prefix, 1, conc, r.opts.Duration)
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
