package config

import "errors"

// PassPacing is how the workers role keeps its passes behind the primary write
// (memory-architecture, "Background passes": passes never slow the primary write): at
// most Concurrency passes of a process run at once, and after each the process's
// passes rest RestRatio times as long as it took, so passes hold the role at most
// 1/(1+RestRatio) of the time whatever their intervals.
type PassPacing struct {
	Concurrency int     // LOOM_WORKERS_PASS_CONCURRENCY: passes of one process running at once
	RestRatio   float64 // LOOM_WORKERS_PASS_REST_RATIO: rest after a pass, as a multiple of its time; 0 rests none
	// Gate is which passes take their turn at the gate (LOOM_WORKERS_PASS_GATE):
	// GateBackground (the default), all but the conflict resolver's (a flagged write's
	// follow-up), which then waits for no other; GateAll, every pass and feed. Behind a busy session_digest pass the resolver judged a
	// conflicting write in 1.5 s at the median with background, 37 s with all
	// (docs/bench/RESULTS-passes.md).
	Gate string
}

// The passes the gate paces (PassPacing.Gate).
const (
	GateAll        = "all"
	GateBackground = "background"
)

func readPassPacing(r *reader) PassPacing {
	return PassPacing{Concurrency: r.int("LOOM_WORKERS_PASS_CONCURRENCY", 1), RestRatio: r.float("LOOM_WORKERS_PASS_REST_RATIO", 3),
		Gate: r.str("LOOM_WORKERS_PASS_GATE", GateBackground)}
}

func (p PassPacing) validate() error {
	if p.Concurrency < 1 || p.RestRatio < 0 {
		return errors.New("LOOM_WORKERS_PASS_CONCURRENCY must be positive and LOOM_WORKERS_PASS_REST_RATIO not negative")
	}
	if p.Gate != GateAll && p.Gate != GateBackground {
		return errors.New("LOOM_WORKERS_PASS_GATE must be all or background")
	}
	return nil
}
