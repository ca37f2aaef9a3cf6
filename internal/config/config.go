// Package config reads Loom's settings from the environment. Names follow the seeds
// (LOOM_PG_*, LOOM_MEMORY_*); every setting has a default a developer can run with.
package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/memrow"
)

// Config is every setting loomd reads.
type Config struct {
	HTTPAddr      string        // LOOM_HTTP_ADDR
	Roles         []string      // LOOM_ROLES: command, query, relay, projector (api = command + query)
	ShutdownGrace time.Duration // LOOM_SHUTDOWN_GRACE_MS: how long SIGTERM waits for in-flight work
	DeploymentID  string        // LOOM_DEPLOYMENT_ID: the deployment this process belongs to ("" = whatever is recorded)

	PGDSN                string        // LOOM_PG_DSN
	PGDurability         string        // LOOM_PG_DURABILITY: synchronous (a synchronous standby is required) or local
	PGWriteDeadline      time.Duration // LOOM_PG_WRITE_DEADLINE_MS: a write's whole time in Postgres, the standby's ack included
	PGPoolMin            int32         // LOOM_PG_POOL_MIN_SIZE
	PGPoolMax            int32         // LOOM_PG_POOL_MAX_SIZE
	PGStatementTimeout   time.Duration // LOOM_PG_STATEMENT_TIMEOUT_MS
	PGCommitLockTimeout  time.Duration // LOOM_PG_COMMIT_LOCK_TIMEOUT_MS
	PGProjectionWait     time.Duration // LOOM_PG_PROJECTION_WAIT_MS: the search barrier's budget
	PGPublishInterval    time.Duration // LOOM_PG_PUBLISH_INTERVAL_MS: the projector's insert pace
	PGAdmissionRounds    int           // LOOM_PG_ADMISSION_ROUNDS
	PGAdmissionDeadline  time.Duration // LOOM_PG_ADMISSION_DEADLINE_MS
	PGAdmissionGapMax    int           // LOOM_PG_ADMISSION_GAP_MAX: revisions an admission examines before PROJECTION_BEHIND
	IdempotencyLease     time.Duration // LOOM_PG_REQUEST_LEASE_SECONDS: how long a request holds its Idempotency-Key
	SweepInterval        time.Duration // LOOM_SWEEP_INTERVAL_S: expiry, idempotency and erasure sweeps
	ErasureEvidence      time.Duration // LOOM_PG_ERASURE_EVIDENCE_HOURS: how long an erased memory's stale writes are refused
	ErasureLedgerKeep    time.Duration // LOOM_ERASURE_LEDGER_DAYS: how long a finished erasure saga is kept
	ErasureLease         time.Duration // LOOM_ERASURE_LEASE_S: a saga runner's hold before erasure_recovery takes over
	ErasureMaxAttempts   int           // LOOM_ERASURE_MAX_ATTEMPTS: runs of a saga before it is marked failed
	ErasureStepTimeout   time.Duration // LOOM_ERASURE_STEP_TIMEOUT_MS: one saga step's wait per run
	ErasureRequestWait   time.Duration // LOOM_ERASURE_REQUEST_WAIT_MS: how long POST /v1/erasures waits for its saga
	ErasureRecovery      time.Duration // LOOM_ERASURE_RECOVERY_INTERVAL_MS: how often erasure_recovery looks for stopped sagas
	BootMigrate          bool          // LOOM_BOOT_MIGRATE
	CHAddr               []string      // LOOM_CH_ADDR (host:port of the native protocol, comma separated)
	CHUser, CHPassword   string        // LOOM_CH_USER, LOOM_CH_PASSWORD
	CHCluster            string        // LOOM_CH_CLUSTER: replicated tables ON CLUSTER this cluster ("" = one server)
	CHReadTimeout        time.Duration // LOOM_CH_READ_TIMEOUT_MS: how long a statement's answer is awaited
	KafkaBrokers         []string      // LOOM_KAFKA_BROKERS
	Topic                string        // LOOM_TOPIC
	TopicPartitions      int32         // LOOM_TOPIC_PARTITIONS (when loomd creates the topic)
	TopicReplication     int16         // LOOM_TOPIC_REPLICATION
	EventSource          string        // LOOM_EVENT_SOURCE: the CloudEvents source of every record
	OutboxBatch          int           // LOOM_OUTBOX_BATCH_ROWS
	OutboxMaxAttempts    int           // LOOM_OUTBOX_MAX_ATTEMPTS
	OutboxPoll           time.Duration // LOOM_OUTBOX_POLL_MS: the relay's fallback when no NOTIFY arrives
	Projection           string        // LOOM_PROJECTION: the projection the query side serves
	ProjectorBatch       int           // LOOM_PROJECTOR_BATCH_ROWS
	ProjectorSession     time.Duration // LOOM_PROJECTOR_SESSION_TIMEOUT_MS: how soon a dead projector's partitions move
	ProjectorAttempts    int           // LOOM_PROJECTOR_BATCH_ATTEMPTS: tries of a failing batch before it is split by namespace
	ProjectorRepair      time.Duration // LOOM_PROJECTOR_REPAIR_INTERVAL_MS: how often recorded projection failures are retried (0: never)
	MemoryCharLimit      int           // LOOM_MEMORY_CHAR_LIMIT
	ConflictThreshold    float64       // LOOM_CONFLICT_THRESHOLD: a peer at or above it is close
	DuplicateThreshold   float64       // LOOM_DUPLICATE_THRESHOLD: a close peer at or above it may be a duplicate
	SensitiveRetention   time.Duration // LOOM_MEMORY_SENSITIVE_RETENTION_DAYS: how long a high row is kept
	PeerLimit            int           // LOOM_MEMORY_PEER_LIMIT: peers a write reads
	BulkConflictCheckMax int           // LOOM_BULK_CONFLICT_CHECK_MAX_ENTRIES: bulk entries judged against the namespace
	SearchTopKDefault    int           // LOOM_SEARCH_TOP_K_DEFAULT
	SearchTopKMax        int           // LOOM_SEARCH_TOP_K_MAX
	SearchMinScore       float64       // LOOM_MEMORY_SEARCH_MIN_SCORE: below it a search abstains (below_threshold)
	PriorCap             float64       // LOOM_MEMORY_PRIOR_CAP: the most the prior group moves a hit's score (fraction)
	BM25K1, BM25B        float64       // LOOM_BM25_K1, LOOM_BM25_B
	// LOOM_SEARCH_WEIGHT_VECTOR, _LEXICAL, _KEY, _GRAPH: weighted fusion's leg weights
	WeightVector, WeightLexical, WeightKey, WeightGraph float64
	EmbedCacheSize                                      int           // LOOM_EMBEDDING_CACHE_SIZE
	EmbedCacheTTL                                       time.Duration // LOOM_EMBEDDING_CACHE_TTL_S
	Embedder                                            string        // LOOM_EMBEDDER: hash or openai
	EmbedderDim                                         int           // LOOM_EMBEDDER_DIM
	OpenAIBaseURL                                       string        // LOOM_OPENAI_BASE_URL
	OpenAIAPIKey                                        string        // LOOM_OPENAI_API_KEY
	OpenAIModel                                         string        // LOOM_OPENAI_MODEL
	RequestBodyLimitBytes                               int           // LOOM_HTTP_BODY_LIMIT_BYTES
	LogLevel                                            string        // LOOM_LOG_LEVEL
	AdapterUpstreamURL                                  string        // LOOM_ADAPTER_UPSTREAM_URL: the REST API /mcp and /mem0 call ("" = this process's)
	Mem0Namespace                                       string        // LOOM_MEM0_NAMESPACE: the namespace of mem0 memories without an app_id
	Mem0Infer                                           string        // LOOM_MEM0_INFER: what a mem0 add with infer=true does: refuse or verbatim
}

// Lookup returns an environment variable's value, or "" when unset (os.Getenv).
type Lookup func(string) string

// Setting is one environment variable Load reads and its default as text ("" = none).
type Setting struct {
	Name, Default string
}

// Roles a process can run. "api" is the older name of command + query.
const (
	RoleCommand   = "command"
	RoleQuery     = "query"
	RoleRelay     = "relay"
	RoleProjector = "projector"
)

// AllRoles is every role, in the order a process starts them.
func AllRoles() []string { return []string{RoleCommand, RoleQuery, RoleRelay, RoleProjector} }

// Durability modes (LOOM_PG_DURABILITY).
const (
	DurabilitySynchronous = "synchronous"
	DurabilityLocal       = "local"
)

// Load reads every setting; a malformed value is an error naming the variable.
func Load(env Lookup) (Config, error) {
	c, _, err := load(env)
	return c, err
}

// Settings lists every variable Load reads, with its default: deploy/CONFIG.md is
// checked against it.
func Settings() []Setting {
	_, s, _ := load(func(string) string { return "" })
	return s
}

func load(env Lookup) (Config, []Setting, error) {
	r := reader{env: env}
	c := Config{
		HTTPAddr:              r.str("LOOM_HTTP_ADDR", ":8080"),
		ShutdownGrace:         r.ms("LOOM_SHUTDOWN_GRACE_MS", 20000),
		DeploymentID:          r.str("LOOM_DEPLOYMENT_ID", ""),
		PGDSN:                 r.str("LOOM_PG_DSN", ""),
		PGDurability:          r.str("LOOM_PG_DURABILITY", DurabilitySynchronous),
		PGWriteDeadline:       r.ms("LOOM_PG_WRITE_DEADLINE_MS", 15000),
		PGPoolMin:             int32(r.int("LOOM_PG_POOL_MIN_SIZE", 2)),
		PGPoolMax:             int32(r.int("LOOM_PG_POOL_MAX_SIZE", 40)),
		PGStatementTimeout:    r.ms("LOOM_PG_STATEMENT_TIMEOUT_MS", 10000),
		PGCommitLockTimeout:   r.ms("LOOM_PG_COMMIT_LOCK_TIMEOUT_MS", 5000),
		PGProjectionWait:      r.ms("LOOM_PG_PROJECTION_WAIT_MS", 5000),
		PGPublishInterval:     r.ms("LOOM_PG_PUBLISH_INTERVAL_MS", 250),
		PGAdmissionRounds:     r.int("LOOM_PG_ADMISSION_ROUNDS", 8),
		PGAdmissionDeadline:   r.ms("LOOM_PG_ADMISSION_DEADLINE_MS", 3000),
		PGAdmissionGapMax:     r.int("LOOM_PG_ADMISSION_GAP_MAX", 500),
		IdempotencyLease:      time.Duration(r.int("LOOM_PG_REQUEST_LEASE_SECONDS", 60)) * time.Second,
		SweepInterval:         time.Duration(r.int("LOOM_SWEEP_INTERVAL_S", 30)) * time.Second,
		ErasureEvidence:       time.Duration(r.int("LOOM_PG_ERASURE_EVIDENCE_HOURS", 720)) * time.Hour,
		ErasureLedgerKeep:     time.Duration(r.int("LOOM_ERASURE_LEDGER_DAYS", 365)) * 24 * time.Hour,
		ErasureLease:          time.Duration(r.int("LOOM_ERASURE_LEASE_S", 120)) * time.Second,
		ErasureMaxAttempts:    r.int("LOOM_ERASURE_MAX_ATTEMPTS", 10),
		ErasureStepTimeout:    r.ms("LOOM_ERASURE_STEP_TIMEOUT_MS", 60000),
		ErasureRequestWait:    r.ms("LOOM_ERASURE_REQUEST_WAIT_MS", 20000),
		ErasureRecovery:       r.ms("LOOM_ERASURE_RECOVERY_INTERVAL_MS", 10000),
		BootMigrate:           r.bool("LOOM_BOOT_MIGRATE", true),
		CHAddr:                r.list("LOOM_CH_ADDR", ""),
		CHUser:                r.str("LOOM_CH_USER", "default"),
		CHPassword:            r.str("LOOM_CH_PASSWORD", ""),
		CHCluster:             r.str("LOOM_CH_CLUSTER", ""),
		CHReadTimeout:         r.ms("LOOM_CH_READ_TIMEOUT_MS", 60000),
		KafkaBrokers:          r.list("LOOM_KAFKA_BROKERS", ""),
		Topic:                 r.str("LOOM_TOPIC", events.DefaultTopic),
		TopicPartitions:       int32(r.int("LOOM_TOPIC_PARTITIONS", 8)),
		TopicReplication:      int16(r.int("LOOM_TOPIC_REPLICATION", -1)),
		EventSource:           r.str("LOOM_EVENT_SOURCE", "loom"),
		OutboxBatch:           r.int("LOOM_OUTBOX_BATCH_ROWS", 500),
		OutboxMaxAttempts:     r.int("LOOM_OUTBOX_MAX_ATTEMPTS", 10),
		OutboxPoll:            r.ms("LOOM_OUTBOX_POLL_MS", 1000),
		Projection:            r.str("LOOM_PROJECTION", "main"),
		ProjectorBatch:        r.int("LOOM_PROJECTOR_BATCH_ROWS", 5000),
		ProjectorSession:      r.ms("LOOM_PROJECTOR_SESSION_TIMEOUT_MS", 45000),
		ProjectorAttempts:     r.int("LOOM_PROJECTOR_BATCH_ATTEMPTS", 3),
		ProjectorRepair:       r.ms("LOOM_PROJECTOR_REPAIR_INTERVAL_MS", 30000),
		MemoryCharLimit:       r.int("LOOM_MEMORY_CHAR_LIMIT", memrow.DefaultCharLimit),
		ConflictThreshold:     r.float("LOOM_CONFLICT_THRESHOLD", 0.80),
		DuplicateThreshold:    r.float("LOOM_DUPLICATE_THRESHOLD", 0.92),
		SensitiveRetention:    time.Duration(r.int("LOOM_MEMORY_SENSITIVE_RETENTION_DAYS", 30)) * 24 * time.Hour,
		PeerLimit:             r.int("LOOM_MEMORY_PEER_LIMIT", 16),
		BulkConflictCheckMax:  r.int("LOOM_BULK_CONFLICT_CHECK_MAX_ENTRIES", 100),
		SearchTopKDefault:     r.int("LOOM_SEARCH_TOP_K_DEFAULT", 10),
		SearchTopKMax:         r.int("LOOM_SEARCH_TOP_K_MAX", 100),
		SearchMinScore:        r.float("LOOM_MEMORY_SEARCH_MIN_SCORE", 0.3),
		PriorCap:              r.float("LOOM_MEMORY_PRIOR_CAP", 0.05),
		BM25K1:                r.float("LOOM_BM25_K1", 1.2),
		BM25B:                 r.float("LOOM_BM25_B", 0.75),
		WeightVector:          r.float("LOOM_SEARCH_WEIGHT_VECTOR", 0.30),
		WeightLexical:         r.float("LOOM_SEARCH_WEIGHT_LEXICAL", 0.40),
		WeightKey:             r.float("LOOM_SEARCH_WEIGHT_KEY", 0.30),
		WeightGraph:           r.float("LOOM_SEARCH_WEIGHT_GRAPH", 0.20),
		EmbedCacheSize:        r.int("LOOM_EMBEDDING_CACHE_SIZE", 4096),
		EmbedCacheTTL:         time.Duration(r.int("LOOM_EMBEDDING_CACHE_TTL_S", 600)) * time.Second,
		Embedder:              r.str("LOOM_EMBEDDER", "hash"),
		EmbedderDim:           r.int("LOOM_EMBEDDER_DIM", 384),
		OpenAIBaseURL:         r.str("LOOM_OPENAI_BASE_URL", "https://api.openai.com"),
		OpenAIAPIKey:          r.str("LOOM_OPENAI_API_KEY", ""),
		OpenAIModel:           r.str("LOOM_OPENAI_MODEL", "text-embedding-3-small"),
		RequestBodyLimitBytes: r.int("LOOM_HTTP_BODY_LIMIT_BYTES", 8<<20),
		LogLevel:              r.str("LOOM_LOG_LEVEL", "info"),
		AdapterUpstreamURL:    r.str("LOOM_ADAPTER_UPSTREAM_URL", ""),
		Mem0Namespace:         r.str("LOOM_MEM0_NAMESPACE", "mem0"),
		Mem0Infer:             r.str("LOOM_MEM0_INFER", "refuse"),
	}
	roles, err := ParseRoles(r.str("LOOM_ROLES", strings.Join(AllRoles(), ",")))
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("LOOM_ROLES: %w", err))
	}
	c.Roles = roles
	if len(r.errs) > 0 {
		return c, r.settings, errors.Join(r.errs...)
	}
	return c, r.settings, c.check()
}

// ParseRoles reads a comma-separated role list: unknown names are refused, "api"
// stands for command and query, duplicates collapse, and the result is in AllRoles order.
func ParseRoles(list string) ([]string, error) {
	want := map[string]bool{}
	for _, r := range strings.Split(list, ",") {
		switch r = strings.TrimSpace(r); r {
		case "":
		case "api":
			want[RoleCommand], want[RoleQuery] = true, true
		case RoleCommand, RoleQuery, RoleRelay, RoleProjector:
			want[r] = true
		default:
			return nil, fmt.Errorf("unknown role %q (command, query, relay, projector; api = command,query)", r)
		}
	}
	var out []string
	for _, r := range AllRoles() {
		if want[r] {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no role named")
	}
	return out, nil
}

func (c Config) check() error {
	var errs []error
	switch c.PGDurability {
	case DurabilitySynchronous, DurabilityLocal:
	default:
		errs = append(errs, fmt.Errorf("LOOM_PG_DURABILITY: unknown mode %q (synchronous, local)", c.PGDurability))
	}
	if c.PGWriteDeadline <= 0 || c.ShutdownGrace <= 0 || c.ProjectorSession <= 0 {
		errs = append(errs, errors.New("LOOM_PG_WRITE_DEADLINE_MS, LOOM_SHUTDOWN_GRACE_MS and LOOM_PROJECTOR_SESSION_TIMEOUT_MS must be positive"))
	}
	if c.PGProjectionWait <= 0 {
		errs = append(errs, errors.New("LOOM_PG_PROJECTION_WAIT_MS must be positive"))
	}
	if c.PGPublishInterval < 0 {
		errs = append(errs, errors.New("LOOM_PG_PUBLISH_INTERVAL_MS must not be negative"))
	}
	if c.SearchTopKDefault < 1 || c.SearchTopKMax < c.SearchTopKDefault {
		errs = append(errs, errors.New("LOOM_SEARCH_TOP_K_DEFAULT must be at least 1 and at most LOOM_SEARCH_TOP_K_MAX"))
	}
	if c.ConflictThreshold <= 0 || c.ConflictThreshold > 1 || c.DuplicateThreshold < c.ConflictThreshold || c.DuplicateThreshold > 1 {
		errs = append(errs, errors.New("LOOM_CONFLICT_THRESHOLD and LOOM_DUPLICATE_THRESHOLD must satisfy 0 < conflict <= duplicate <= 1"))
	}
	if c.WeightVector < 0 || c.WeightLexical < 0 || c.WeightKey < 0 || c.WeightGraph < 0 || c.WeightVector+c.WeightLexical+c.WeightKey <= 0 {
		errs = append(errs, errors.New("LOOM_SEARCH_WEIGHT_VECTOR, _LEXICAL and _KEY must be non-negative and not all zero"))
	}
	if c.MemoryCharLimit < 1 {
		errs = append(errs, errors.New("LOOM_MEMORY_CHAR_LIMIT must be positive"))
	}
	if c.OutboxMaxAttempts < 1 || c.OutboxBatch < 1 || c.ProjectorBatch < 1 || c.ProjectorAttempts < 1 {
		errs = append(errs, errors.New("LOOM_OUTBOX_MAX_ATTEMPTS, LOOM_OUTBOX_BATCH_ROWS, LOOM_PROJECTOR_BATCH_ROWS and LOOM_PROJECTOR_BATCH_ATTEMPTS must be positive"))
	}
	if c.ProjectorRepair < 0 {
		errs = append(errs, errors.New("LOOM_PROJECTOR_REPAIR_INTERVAL_MS must not be negative"))
	}
	switch c.Embedder {
	case "hash", "openai":
	default:
		errs = append(errs, fmt.Errorf("LOOM_EMBEDDER: unknown embedder %q (hash, openai)", c.Embedder))
	}
	if err := memrow.ValidateName("LOOM_PROJECTION", c.Projection); err != nil {
		errs = append(errs, err)
	}
	if err := memrow.ValidateName("LOOM_MEM0_NAMESPACE", c.Mem0Namespace); err != nil {
		errs = append(errs, err)
	}
	switch c.Mem0Infer {
	case "refuse", "verbatim":
	default:
		errs = append(errs, fmt.Errorf("LOOM_MEM0_INFER: unknown mode %q (refuse, verbatim)", c.Mem0Infer))
	}
	return errors.Join(errs...)
}

// HasRole reports whether this process runs role (one of AllRoles).
func (c Config) HasRole(role string) bool {
	for _, r := range c.Roles {
		if r == role || (r == "api" && (role == RoleCommand || role == RoleQuery)) {
			return true
		}
	}
	return false
}

// RequireStores refuses to start without the stores: only `loomd dev` starts embedded ones.
func (c Config) RequireStores() error {
	var missing []string
	if c.PGDSN == "" {
		missing = append(missing, "LOOM_PG_DSN")
	}
	if len(c.CHAddr) == 0 {
		missing = append(missing, "LOOM_CH_ADDR")
	}
	if len(c.KafkaBrokers) == 0 {
		missing = append(missing, "LOOM_KAFKA_BROKERS")
	}
	if len(missing) > 0 {
		return fmt.Errorf("loomd serve needs %s (use `loomd dev` to run with embedded stores)", strings.Join(missing, ", "))
	}
	return nil
}

// reader reads variables and records each one it reads with its default, so the
// documentation can be checked against what the code reads.
type reader struct {
	env      Lookup
	errs     []error
	settings []Setting
}

func (r *reader) raw(name, def string) string {
	r.settings = append(r.settings, Setting{Name: name, Default: def})
	return strings.TrimSpace(r.env(name))
}

func (r *reader) str(name, def string) string {
	if v := r.raw(name, def); v != "" {
		return v
	}
	return def
}

func (r *reader) list(name, def string) []string {
	var out []string
	for _, p := range strings.Split(r.str(name, def), ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (r *reader) int(name string, def int) int {
	v := r.raw(name, strconv.Itoa(def))
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s: %q is not a whole number", name, v))
		return def
	}
	return n
}

func (r *reader) float(name string, def float64) float64 {
	v := r.raw(name, strconv.FormatFloat(def, 'f', -1, 64))
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s: %q is not a number", name, v))
		return def
	}
	return f
}

func (r *reader) ms(name string, def int) time.Duration {
	return time.Duration(r.int(name, def)) * time.Millisecond
}

func (r *reader) bool(name string, def bool) bool {
	v := r.raw(name, strconv.FormatBool(def))
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s: %q is not a boolean", name, v))
		return def
	}
	return b
}
