package config

import (
	"errors"
	"time"
)

// Pass is a background pass of the workers role that calls no model
// (memory-architecture, "Background passes"): a switch, its batch and its cadence.
type Pass struct {
	Enabled  bool          // LOOM_<PASS>_ENABLED
	Batch    int           // LOOM_<PASS>_BATCH: rows a pass takes
	Interval time.Duration // LOOM_<PASS>_INTERVAL_MS: the pass's fallback wake-up
	MaxAge   time.Duration // LOOM_<PASS>_MAX_AGE_DAYS, for a pass of the topic: an older row is no longer owed
}

// readPass reads a pass's settings under prefix (LOOM_EMBEDDING_WORKER, ...).
func readPass(r *reader, prefix string, enabled bool, batch int, interval time.Duration) Pass {
	return Pass{
		Enabled:  r.bool(prefix+"_ENABLED", enabled),
		Batch:    r.int(prefix+"_BATCH", batch),
		Interval: r.ms(prefix+"_INTERVAL_MS", int(interval/time.Millisecond)),
	}
}

// validatePass checks a pass's settings.
func validatePass(p Pass, prefix string) error {
	if p.Batch < 1 || p.Interval <= 0 || p.MaxAge < 0 {
		return errors.New(prefix + "_BATCH and _INTERVAL_MS must be positive, _MAX_AGE_DAYS not negative")
	}
	return nil
}
