package bench

import (
	"context"
	"fmt"
)

// chain measures memory.set with the audit chain on against the same load with it off,
// in one run (issue 33's figure: set p50 on vs off within 1.1×). The chain is linked by
// the projector (each batch reads its namespaces' last row hashes from ClickHouse and
// hashes its rows), not on the write path, so what it can cost a write is the
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
	for _, conc := range r.levels(1, 8) {
		name := fmt.Sprintf("concurrency=%d", conc)
		var on, off Sample
		for _, side := range []struct {
			chain bool
			out   *Sample
		}{{true, &on}, {false, &off}} {
			p.SetAuditChain(side.chain)
			s, err := r.setLoad(ctx, fmt.Sprintf("memory.set chain=%v %s", side.chain, name),
				r.namespace("chain", fmt.Sprint(side.chain), fmt.Sprint(conc)), 1, conc, r.opts.Duration)
			if err != nil {
				return nil, err
			}
			*side.out = s
		}
		res.compare(name, on, off, "writes/s")
	}
	return res, nil
}
