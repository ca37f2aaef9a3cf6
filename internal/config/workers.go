package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Workers configures the background model work the workers role runs, each worker a
// consumer group of the revisions topic: the conflict resolver, which judges the
// writes marked judgement_owed, and the entity extractor, which fills the graph for
// rows written without entities.
type Workers struct {
	Resolver Resolver
	Entities EntityExtractor
	Profiles StructuredProfile // the structured_profile pass (profiles.go)
	// Embedding is the embedding worker (LOOM_EMBEDDING_WORKER_*): it fills the
	// vectors of the rows committed as stubs while the embedder was down.
	Embedding Pass
	// UsageFold is the usage fold (LOOM_USAGE_FOLD_*): the memory.usage_recorded
	// records' counts folded into the rows' reinforcement, recall and evidence counts.
	UsageFold Pass
	Audit     AuditCheckpoints
	// SessionDigest is the session_digest pass (LOOM_SESSION_DIGEST_*): a digest of each
	// user's session, one model call per window of new turns.
	SessionDigest SessionDigest
	// SensitivitySweep is the sensitivity sweep (LOOM_SENSITIVITY_SWEEP_*): the rule-based
	// detector run over the rows written by paths that skip it, high ones relabelled.
	SensitivitySweep Pass
	// Communities is the entity_communities pass (LOOM_ENTITY_COMMUNITIES_*, off by
	// default): label propagation over each namespace's co-occurrence graph.
	Communities Pass
	// ProfileConsolidation is the profile_consolidation pass (LOOM_PROFILE_CONSOLIDATION_*,
	// off by default, and per namespace opt-in): one profile section of a user's
	// preferences and decisions, one model call per rebuild.
	ProfileConsolidation ModelPass
	// Recalibration is the recalibration pass (LOOM_RECALIBRATION_*, on by default): each
	// namespace's search backgrounds rewritten from its vectors and its usage.
	Recalibration Pass
	// ReflectionDistill is the reflection_distill pass (LOOM_REFLECTION_DISTILL_*, off by
	// default, and per namespace opt-in): an outcome label of each quiet session and
	// reflections from its turns, one model call a session.
	ReflectionDistill ReflectionDistill
	// Pacing is the passes' share of the role (LOOM_WORKERS_PASS_*, pacing.go).
	Pacing PassPacing
}

// ReflectionDistill is the reflection_distill pass (workers/reflection_distill.go): a
// session whose last turn is Idle old and not labelled owes an outcome; a pass labels
// up to Batch sessions, each with one model call over its last MaxTurns turns.
type ReflectionDistill struct {
	ModelPass
	Idle     time.Duration // LOOM_REFLECTION_DISTILL_IDLE_SECONDS: a session quiet this long is over for now
	MaxTurns int           // LOOM_REFLECTION_DISTILL_MAX_TURNS: the session's last turns one model call reads
}

// SessionDigest is the session_digest pass (workers/session_digests.go): a session
// owes a digest once MinTurns turns are not digested, or once it has turns not
// digested and none new for Idle; a pass digests up to Batch sessions, each with one
// model call over the digest before and at most MaxTurns turns after it.
type SessionDigest struct {
	Enabled  bool          // LOOM_SESSION_DIGEST_ENABLED: auto is on when a model provider is configured
	MinTurns int           // LOOM_SESSION_DIGEST_MIN_TURNS: new turns that make a session owe a digest at once
	Idle     time.Duration // LOOM_SESSION_DIGEST_IDLE_SECONDS: a session quiet this long owes a digest of any new turn
	MaxTurns int           // LOOM_SESSION_DIGEST_MAX_TURNS: turns one model call reads (a longer backlog takes several windows)
	Batch    int           // LOOM_SESSION_DIGEST_BATCH: sessions one pass digests
	MaxAge   time.Duration // LOOM_SESSION_DIGEST_MAX_AGE_DAYS: a session with no turn this recent is not digested
	Interval time.Duration // LOOM_SESSION_DIGEST_INTERVAL_MS: between passes
}

// Validate checks the pass's settings.
func (d SessionDigest) Validate() error {
	if d.MinTurns < 1 || d.Idle <= 0 || d.MaxTurns < 1 || d.Batch < 1 || d.MaxAge <= 0 || d.Interval <= 0 {
		return errors.New("LOOM_SESSION_DIGEST_MIN_TURNS, _IDLE_SECONDS, _MAX_TURNS, _BATCH, _MAX_AGE_DAYS and _INTERVAL_MS must be positive")
	}
	return nil
}

func (d ReflectionDistill) validate() error {
	if d.Idle <= 0 || d.MaxTurns < 1 {
		return errors.Join(validateModelPass(d.ModelPass, "LOOM_REFLECTION_DISTILL"),
			errors.New("LOOM_REFLECTION_DISTILL_IDLE_SECONDS and _MAX_TURNS must be positive"))
	}
	return validateModelPass(d.ModelPass, "LOOM_REFLECTION_DISTILL")
}

// AuditCheckpoints is the paced pass that verifies each namespace's audit chain in
// ClickHouse past its last checkpoint and records a new one in Postgres
// (internal/auditchain, workers/audit_checkpoints.go).
type AuditCheckpoints struct {
	Interval time.Duration // LOOM_AUDIT_CHECKPOINT_INTERVAL_MS: between passes; 0 turns the pass off
	MaxRows  int           // LOOM_AUDIT_CHECKPOINT_MAX_ROWS: audit rows one pass verifies of a namespace
}

// Resolver is the conflict resolver (memory-architecture, "The conflict resolver").
type Resolver struct {
	// Enabled resolves at load (LOOM_MEMORY_CONFLICT_RESOLVER_ENABLED): auto is on when
	// a model provider is configured; an explicit value wins. Writes are marked for
	// judgement (a peer at MinSimilarity) only while it is on.
	Enabled       bool
	MinSimilarity float64 // LOOM_MEMORY_CONFLICT_RESOLVER_MIN_SIMILARITY: a peer's floor, and a write's mark
	MaxPeers      int     // LOOM_MEMORY_CONFLICT_RESOLVER_MAX_PEERS: peers judged with a row in one call
	// The thresholds, highest first: an update retires at Retire, a contradiction (or an
	// update below Retire) flags at Flag, a compatible verdict clears at Clear.
	RetireConfidence float64       // LOOM_MEMORY_CONFLICT_RESOLVER_RETIRE_CONFIDENCE
	FlagConfidence   float64       // LOOM_MEMORY_CONFLICT_RESOLVER_FLAG_CONFIDENCE
	ClearConfidence  float64       // LOOM_MEMORY_CONFLICT_RESOLVER_CLEAR_CONFIDENCE
	Batch            int           // LOOM_MEMORY_CONFLICT_RESOLVER_BATCH: owed rows a pass takes
	Concurrency      int           // LOOM_MEMORY_CONFLICT_RESOLVER_CONCURRENCY: rows judged at once
	MaxOwedAge       time.Duration // LOOM_MEMORY_CONFLICT_RESOLVER_MAX_OWED_AGE_DAYS: an older write is no longer judged
	Interval         time.Duration // LOOM_MEMORY_CONFLICT_RESOLVER_INTERVAL_MS: the pass's fallback wake-up
}

// EntityExtractor is the entity extractor (memory-architecture, "Background passes").
type EntityExtractor struct {
	Enabled     bool          // LOOM_ENTITY_EXTRACTOR_ENABLED: auto is on when a model provider is configured
	MaxEntities int           // LOOM_ENTITY_EXTRACTOR_MAX_ENTITIES: entities (and relations) kept of one row
	Batch       int           // LOOM_ENTITY_EXTRACTOR_BATCH: rows a pass takes
	Concurrency int           // LOOM_ENTITY_EXTRACTOR_CONCURRENCY: namespaces extracted at once
	MaxAge      time.Duration // LOOM_ENTITY_EXTRACTOR_MAX_AGE_DAYS: an older write is not extracted
	Interval    time.Duration // LOOM_ENTITY_EXTRACTOR_INTERVAL_MS: the pass's fallback wake-up
}

// readWorkers reads the section; llm is the provider's, which auto resolves against.
func readWorkers(r *reader, llm LLM) Workers {
	w := Workers{
		Resolver: Resolver{
			Enabled:          r.auto("LOOM_MEMORY_CONFLICT_RESOLVER_ENABLED", llm.Configured()),
			MinSimilarity:    r.float("LOOM_MEMORY_CONFLICT_RESOLVER_MIN_SIMILARITY", 0.60),
			MaxPeers:         r.int("LOOM_MEMORY_CONFLICT_RESOLVER_MAX_PEERS", 8),
			RetireConfidence: r.float("LOOM_MEMORY_CONFLICT_RESOLVER_RETIRE_CONFIDENCE", 0.98),
			FlagConfidence:   r.float("LOOM_MEMORY_CONFLICT_RESOLVER_FLAG_CONFIDENCE", 0.95),
			ClearConfidence:  r.float("LOOM_MEMORY_CONFLICT_RESOLVER_CLEAR_CONFIDENCE", 0.90),
			Batch:            r.int("LOOM_MEMORY_CONFLICT_RESOLVER_BATCH", 40),
			Concurrency:      r.int("LOOM_MEMORY_CONFLICT_RESOLVER_CONCURRENCY", 8),
			MaxOwedAge:       r.days("LOOM_MEMORY_CONFLICT_RESOLVER_MAX_OWED_AGE_DAYS", 30),
			Interval:         r.ms("LOOM_MEMORY_CONFLICT_RESOLVER_INTERVAL_MS", 30000),
		},
		Entities: EntityExtractor{
			Enabled:     r.auto("LOOM_ENTITY_EXTRACTOR_ENABLED", llm.Configured()),
			MaxEntities: r.int("LOOM_ENTITY_EXTRACTOR_MAX_ENTITIES", 16),
			Batch:       r.int("LOOM_ENTITY_EXTRACTOR_BATCH", 40),
			Concurrency: r.int("LOOM_ENTITY_EXTRACTOR_CONCURRENCY", 4),
			MaxAge:      r.days("LOOM_ENTITY_EXTRACTOR_MAX_AGE_DAYS", 30),
			Interval:    r.ms("LOOM_ENTITY_EXTRACTOR_INTERVAL_MS", 30000),
		},
		Profiles:  readStructuredProfile(r, llm),
		Embedding: readPass(r, "LOOM_EMBEDDING_WORKER", true, 64, 30*time.Second),
		UsageFold: readPass(r, "LOOM_USAGE_FOLD", true, 200, 10*time.Second),
		Audit: AuditCheckpoints{
			Interval: r.ms("LOOM_AUDIT_CHECKPOINT_INTERVAL_MS", 60000),
			MaxRows:  r.int("LOOM_AUDIT_CHECKPOINT_MAX_ROWS", 100000),
		},
	}
	w.Embedding.MaxAge = r.days("LOOM_EMBEDDING_WORKER_MAX_AGE_DAYS", 30)
	w.UsageFold.MaxAge = r.days("LOOM_USAGE_FOLD_MAX_AGE_DAYS", 30)
	w.SensitivitySweep = readPass(r, "LOOM_SENSITIVITY_SWEEP", true, 100, 30*time.Second)
	w.SensitivitySweep.MaxAge = r.days("LOOM_SENSITIVITY_SWEEP_MAX_AGE_DAYS", 30)
	w.Communities = readPass(r, "LOOM_ENTITY_COMMUNITIES", false, 20, time.Hour)
	w.Communities.MaxAge = r.days("LOOM_ENTITY_COMMUNITIES_MAX_AGE_DAYS", 30)
	w.Recalibration = readPass(r, "LOOM_RECALIBRATION", true, 20, time.Hour)
	w.Recalibration.MaxAge = r.days("LOOM_RECALIBRATION_MAX_AGE_DAYS", 30)
	w.ProfileConsolidation = readModelPass(r, "LOOM_PROFILE_CONSOLIDATION", false, 40, 30*time.Second, 30, 3)
	w.ReflectionDistill = ReflectionDistill{ModelPass: readModelPass(r, "LOOM_REFLECTION_DISTILL", false, 20, 60*time.Second, 7, 3),
		Idle: r.seconds("LOOM_REFLECTION_DISTILL_IDLE_SECONDS", 1800), MaxTurns: r.int("LOOM_REFLECTION_DISTILL_MAX_TURNS", 100)}
	w.Pacing = readPassPacing(r)
	w.SessionDigest = SessionDigest{
		Enabled:  r.auto("LOOM_SESSION_DIGEST_ENABLED", llm.Configured()),
		MinTurns: r.int("LOOM_SESSION_DIGEST_MIN_TURNS", 20),
		Idle:     r.seconds("LOOM_SESSION_DIGEST_IDLE_SECONDS", 600),
		MaxTurns: r.int("LOOM_SESSION_DIGEST_MAX_TURNS", 200),
		Batch:    r.int("LOOM_SESSION_DIGEST_BATCH", 20),
		MaxAge:   r.days("LOOM_SESSION_DIGEST_MAX_AGE_DAYS", 7),
		Interval: r.ms("LOOM_SESSION_DIGEST_INTERVAL_MS", 30000),
	}
	return w
}

// Validate checks the section.
func (w Workers) Validate() error {
	var audit error
	if w.Audit.Interval < 0 || w.Audit.MaxRows < 1 {
		audit = errors.New("LOOM_AUDIT_CHECKPOINT_INTERVAL_MS must not be negative and LOOM_AUDIT_CHECKPOINT_MAX_ROWS must be positive")
	}
	return errors.Join(w.Resolver.Validate(), w.Entities.Validate(), w.Profiles.Validate(), validatePass(w.Embedding, "LOOM_EMBEDDING_WORKER"),
		validatePass(w.UsageFold, "LOOM_USAGE_FOLD"), audit, w.SessionDigest.Validate(),
		validatePass(w.SensitivitySweep, "LOOM_SENSITIVITY_SWEEP"), validatePass(w.Communities, "LOOM_ENTITY_COMMUNITIES"),
		validateModelPass(w.ProfileConsolidation, "LOOM_PROFILE_CONSOLIDATION"), validatePass(w.Recalibration, "LOOM_RECALIBRATION"),
		w.ReflectionDistill.validate(), w.Pacing.validate())
}

// Validate checks the resolver's settings: its thresholds only strictly in their order
// (memory-architecture, "The conflict resolver": "in that order (the settings refuse
// any other)"); an equal pair would leave a verdict band empty.
func (r Resolver) Validate() error {
	var errs []error
	if r.MinSimilarity <= 0 || r.MinSimilarity > 1 {
		errs = append(errs, errors.New("LOOM_MEMORY_CONFLICT_RESOLVER_MIN_SIMILARITY must be in (0, 1]"))
	}
	if !(0 < r.ClearConfidence && r.ClearConfidence < r.FlagConfidence && r.FlagConfidence < r.RetireConfidence && r.RetireConfidence <= 1) {
		errs = append(errs, fmt.Errorf("LOOM_MEMORY_CONFLICT_RESOLVER_CLEAR_CONFIDENCE (%g), _FLAG_CONFIDENCE (%g) and _RETIRE_CONFIDENCE (%g) "+
			"must satisfy 0 < clear < flag < retire <= 1", r.ClearConfidence, r.FlagConfidence, r.RetireConfidence))
	}
	if r.MaxPeers < 1 || r.Batch < 1 || r.Concurrency < 1 || r.MaxOwedAge <= 0 || r.Interval <= 0 {
		errs = append(errs, errors.New("LOOM_MEMORY_CONFLICT_RESOLVER_MAX_PEERS, _BATCH, _CONCURRENCY, _MAX_OWED_AGE_DAYS and _INTERVAL_MS must be positive"))
	}
	return errors.Join(errs...)
}

// Validate checks the entity extractor's settings.
func (e EntityExtractor) Validate() error {
	if e.MaxEntities < 1 || e.Batch < 1 || e.Concurrency < 1 || e.MaxAge <= 0 || e.Interval <= 0 {
		return errors.New("LOOM_ENTITY_EXTRACTOR_MAX_ENTITIES, _BATCH, _CONCURRENCY, _MAX_AGE_DAYS and _INTERVAL_MS must be positive")
	}
	return nil
}

// auto reads a switch that is auto (def decides), or an explicit boolean.
func (r *reader) auto(name string, def bool) bool {
	v := r.raw(name, "auto")
	if v == "" || strings.EqualFold(v, "auto") {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s: %q is not auto or a boolean", name, v))
		return def
	}
	return b
}
