package config

import (
	"errors"
	"time"
)

// StructuredProfile is the structured_profile pass (memory-architecture, "Background
// passes"): a profile per user of each namespace with a profile schema.
type StructuredProfile struct {
	Enabled  bool          // LOOM_STRUCTURED_PROFILE_ENABLED: auto is on when a model provider is configured
	Batch    int           // LOOM_STRUCTURED_PROFILE_BATCH: queued revisions one pass takes
	Attempts int           // LOOM_STRUCTURED_PROFILE_ATTEMPTS: model answers one build asks for before it gives up until a later pass
	MaxAge   time.Duration // LOOM_STRUCTURED_PROFILE_MAX_AGE_DAYS: an older write no longer queues a rebuild
	Interval time.Duration // LOOM_STRUCTURED_PROFILE_INTERVAL_MS: the pass's fallback wake-up (its cadence)
}

func readStructuredProfile(r *reader, llm LLM) StructuredProfile {
	return StructuredProfile{
		Enabled:  r.auto("LOOM_STRUCTURED_PROFILE_ENABLED", llm.Configured()),
		Batch:    r.int("LOOM_STRUCTURED_PROFILE_BATCH", 40),
		Attempts: r.int("LOOM_STRUCTURED_PROFILE_ATTEMPTS", 3),
		MaxAge:   r.days("LOOM_STRUCTURED_PROFILE_MAX_AGE_DAYS", 30),
		Interval: r.ms("LOOM_STRUCTURED_PROFILE_INTERVAL_MS", 30000),
	}
}

// Validate checks the pass's settings.
func (p StructuredProfile) Validate() error {
	if p.Batch < 1 || p.Attempts < 1 || p.MaxAge <= 0 || p.Interval <= 0 {
		return errors.New("LOOM_STRUCTURED_PROFILE_BATCH, _ATTEMPTS, _MAX_AGE_DAYS and _INTERVAL_MS must be positive")
	}
	return nil
}

// Consolidate is memory.consolidate's clustering (an operation, not a pass).
type Consolidate struct {
	MinSimilarity float64 // LOOM_CONSOLIDATE_MIN_SIMILARITY: the cosine at which two memories may share a cluster
	MaxRows       int     // LOOM_CONSOLIDATE_MAX_ROWS: active memories one run reads
	MaxClusters   int     // LOOM_CONSOLIDATE_MAX_CLUSTERS: clusters one run merges (one model call each)
	MaxCluster    int     // LOOM_CONSOLIDATE_MAX_CLUSTER_SIZE: memories one summary merges
}

func readConsolidate(r *reader) Consolidate {
	return Consolidate{
		MinSimilarity: r.float("LOOM_CONSOLIDATE_MIN_SIMILARITY", 0.85),
		MaxRows:       r.int("LOOM_CONSOLIDATE_MAX_ROWS", 2000),
		MaxClusters:   r.int("LOOM_CONSOLIDATE_MAX_CLUSTERS", 20),
		MaxCluster:    r.int("LOOM_CONSOLIDATE_MAX_CLUSTER_SIZE", 8),
	}
}

// Validate checks the settings.
func (c Consolidate) Validate() error {
	var errs []error
	if c.MinSimilarity <= 0 || c.MinSimilarity > 1 {
		errs = append(errs, errors.New("LOOM_CONSOLIDATE_MIN_SIMILARITY must be in (0, 1]"))
	}
	if c.MaxRows < 2 || c.MaxClusters < 1 || c.MaxCluster < 2 {
		errs = append(errs, errors.New("LOOM_CONSOLIDATE_MAX_ROWS and _MAX_CLUSTER_SIZE must be at least 2, _MAX_CLUSTERS positive"))
	}
	return errors.Join(errs...)
}
