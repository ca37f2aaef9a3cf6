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
}

func readPassPacing(r *reader) PassPacing {
	return PassPacing{Concurrency: r.int("LOOM_WORKERS_PASS_CONCURRENCY", 1), RestRatio: r.float("LOOM_WORKERS_PASS_REST_RATIO", 3)}
}

func (p PassPacing) validate() error {
	if p.Concurrency < 1 || p.RestRatio < 0 {
		return errors.New("LOOM_WORKERS_PASS_CONCURRENCY must be positive and LOOM_WORKERS_PASS_REST_RATIO not negative")
	}
	return nil
}
