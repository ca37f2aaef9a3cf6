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
		// Each level runs twice, on first and then off first, so a drift in the
		// machine's load over the run weighs on both sides.
		for _, onFirst := range []bool{true, false} {
			name := fmt.Sprintf("concurrency=%d, %s first", conc, map[bool]string{true: "on", false: "off"}[onFirst])
			var on, off Sample
			for _, chain := range []bool{onFirst, !onFirst} {
				p.SetAuditChain(chain)
				s, err := r.setLoad(ctx, fmt.Sprintf("memory.set chain=%v %s", chain, name),
					r.namespace("chain", fmt.Sprint(chain), fmt.Sprint(conc), fmt.Sprint(onFirst)), 1, conc, r.opts.Duration)
				if err != nil {
					return nil, err
				}
				if chain {
					on = s
				} else {
					off = s
				}
			}
			res.compare(name, on, off, "writes/s")
		}
	}
	return res, nil
}
