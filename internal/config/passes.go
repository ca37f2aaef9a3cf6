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

// ModelPass is a background pass of the topic that calls a model: a pass's settings,
// its age limit, and how many answers one build asks for while they are unusable.
type ModelPass struct {
	Pass
	Attempts int // LOOM_<PASS>_ATTEMPTS: model answers one build asks for before it waits for a later pass
}

// readModelPass reads a model pass's settings under prefix; maxAgeDays and attempts
// are its defaults.
func readModelPass(r *reader, prefix string, enabled bool, batch int, interval time.Duration, maxAgeDays, attempts int) ModelPass {
	p := ModelPass{Pass: readPass(r, prefix, enabled, batch, interval), Attempts: r.int(prefix+"_ATTEMPTS", attempts)}
	p.MaxAge = r.days(prefix+"_MAX_AGE_DAYS", maxAgeDays)
	return p
}

// validateModelPass checks a model pass's settings.
func validateModelPass(p ModelPass, prefix string) error {
	if p.Batch < 1 || p.Interval <= 0 || p.MaxAge <= 0 || p.Attempts < 1 {
		return errors.New(prefix + "_BATCH, _INTERVAL_MS, _MAX_AGE_DAYS and _ATTEMPTS must be positive")
	}
	return nil
}
