// Package config reads Loom's settings from the environment, by role: one section per
// store and per role, each read in one place (its default is written once, here) and
// each checked by its own Validate. A role's constructor takes its section as it is
// (command.New(cfg.Command, cfg.Pipeline, …)); deploy/CONFIG.md lists every variable,
// and docs/architecture.md says which role reads which section.
package config

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/kafka"
	"github.com/loomplane/loom/internal/memrow"
)

// Config is every setting loomd reads, by section. A new section (a model provider,
// an in-process search index) is a type with a Validate, a read function and one line
// in load.
type Config struct {
	Roles    Roles  // LOOM_ROLES: command, query, relay, projector, workers (api = command + query)
	LogLevel string // LOOM_LOG_LEVEL

	Boot     Boot
	HTTP     HTTP
	Pipeline Pipeline

	PG         PG
	ClickHouse ClickHouse
	Kafka      Kafka
	Embedder   Embedder

	Command   Command
	Query     Query
	Relay     Relay
	Projector Projector
	// SearchIndex is the in-process search index every command and query process holds.
	SearchIndex SearchIndex
	LLM         LLM      // LOOM_LLM_*: the model provider
	Workers     Workers  // the workers role: the conflict resolver and the entity extractor
	Adapters    Adapters // the MCP server and the mem0 facade
	Tracing     Tracing  // OTEL_*: where every role's spans go (off without an endpoint)
	Keys        Keys     // LOOM_KEK: what the stored data keys are wrapped under
	Runtime     Runtime  // LOOM_GC_HEAP_FLOOR_MB, LOOM_MEMORY_LIMIT_MB: the Go collector's pace
}

// Boot is what a process does before it serves.
type Boot struct {
	Migrate      bool   // LOOM_BOOT_MIGRATE: apply migrations, record the deployment, create the topic
	DeploymentID string // LOOM_DEPLOYMENT_ID: the deployment this process belongs to ("" = whatever is recorded)
}

// HTTP is the process's listener.
type HTTP struct {
	Addr           string // LOOM_HTTP_ADDR
	BodyLimitBytes int    // LOOM_HTTP_BODY_LIMIT_BYTES
	// TokenCache bounds how long a process keeps answering a token it checked: a
	// revocation reaches every process at once through Postgres NOTIFY, and within
	// this bound when the notification is lost.
	TokenCache time.Duration // LOOM_AUTH_TOKEN_CACHE_MS
	// PprofAddr is where the process serves Go's profiler (net/http/pprof), apart from
	// the API's listener; empty (the default) serves none.
	PprofAddr string // LOOM_PPROF_ADDR
}

// Pipeline is what every role of a deployment agrees on: the topic the journal is
// published to, the CloudEvents source of its records, the projection the query side
// serves and the projector builds, and how long work in hand may finish after a stop.
type Pipeline struct {
	Topic         string        // LOOM_TOPIC
	EventSource   string        // LOOM_EVENT_SOURCE
	Projection    string        // LOOM_PROJECTION
	ShutdownGrace time.Duration // LOOM_SHUTDOWN_GRACE_MS: requests draining, the relay's round, the projector's batch
}

// PG is the Postgres authority.
type PG struct {
	DSN              string        // LOOM_PG_DSN
	Durability       Durability    // LOOM_PG_DURABILITY
	PoolMin          int32         // LOOM_PG_POOL_MIN_SIZE
	PoolMax          int32         // LOOM_PG_POOL_MAX_SIZE
	StatementTimeout time.Duration // LOOM_PG_STATEMENT_TIMEOUT_MS
	// ReadDeadline bounds a request's wait for a Postgres read: the token check, a
	// point read (memory.get, memory.get_by_id). A frozen Postgres answers 503 then.
	ReadDeadline time.Duration // LOOM_PG_READ_DEADLINE_MS
}

// ClickHouse is the read-model store.
type ClickHouse struct {
	Addr           []string      // LOOM_CH_ADDR (host:port of the native protocol, comma separated)
	User, Password string        // LOOM_CH_USER, LOOM_CH_PASSWORD
	Cluster        string        // LOOM_CH_CLUSTER: replicated tables ON CLUSTER this cluster ("" = one server)
	ReadTimeout    time.Duration // LOOM_CH_READ_TIMEOUT_MS: how long a statement's answer is awaited
	// ReadDeadline bounds a request's wait for ClickHouse: a write's peer read, and
	// what a read does after the barrier (its statements and the check of their rows
	// against Postgres). A frozen ClickHouse answers 503 then.
	ReadDeadline time.Duration // LOOM_CH_READ_DEADLINE_MS
}

// Kafka is the brokers, and the topic's shape when loomd creates it.
type Kafka struct {
	Brokers          []string // LOOM_KAFKA_BROKERS
	TopicPartitions  int32    // LOOM_TOPIC_PARTITIONS
	TopicReplication int16    // LOOM_TOPIC_REPLICATION
	// MaxRecordBytes is the largest record Loom produces (LOOM_TOPIC_MAX_RECORD_BYTES):
	// the topic's max.message.bytes when loomd creates it, and the relay's batch limit.
	// A knowledge document whose record (its chunks, their vectors) runs past it is
	// refused with 413 DOCUMENT_TOO_LARGE instead of committed and parked.
	MaxRecordBytes int
}

// Embedder is the model that turns text into vectors.
type Embedder struct {
	Kind   string // LOOM_EMBEDDER: hash or openai
	Dim    int    // LOOM_EMBEDDER_DIM
	OpenAI OpenAI
}

// OpenAI is an OpenAI-compatible /v1/embeddings endpoint.
type OpenAI struct {
	BaseURL string // LOOM_OPENAI_BASE_URL
	APIKey  string // LOOM_OPENAI_API_KEY
	Model   string // LOOM_OPENAI_MODEL
}

// ConflictCalibration is the embedder calibration of memory.set's thresholds (the
// seed's chain: the type's dedup_threshold, the namespace's conflict_threshold, the
// embedder calibration, LOOM_CONFLICT_THRESHOLD). The recalibration pass measures a
// namespace's background median m (workers/recalibration.go); its thresholds become
// t + (m - Baseline)(1 - t)/(1 - Baseline), the same place between the background and
// an identical value, moved at most MaxShift either way.
type ConflictCalibration struct {
	Enabled  bool    // LOOM_CONFLICT_CALIBRATION_ENABLED: memory.set reads the recorded thresholds
	Baseline float64 // LOOM_CONFLICT_CALIBRATION_BASELINE: the median at which the thresholds hold as set
	MaxShift float64 // LOOM_CONFLICT_CALIBRATION_MAX_SHIFT: the most a threshold moves
}

// Command is the write side: admission, the commit, idempotency, the sweeps and erasure.
type Command struct {
	CharLimit         int           // LOOM_MEMORY_CHAR_LIMIT
	AdmissionRounds   int           // LOOM_PG_ADMISSION_ROUNDS
	AdmissionDeadline time.Duration // LOOM_PG_ADMISSION_DEADLINE_MS
	AdmissionGapMax   int           // LOOM_PG_ADMISSION_GAP_MAX: revisions a commit examines before ADMISSION_CONTENDED
	CommitLockTimeout time.Duration // LOOM_PG_COMMIT_LOCK_TIMEOUT_MS
	// ContentKeyTTL is how long the commit keeps a scope's derived content key in
	// process memory (internal/contentkey; 0: none kept, every row hashes in SQL).
	ContentKeyTTL time.Duration // LOOM_CONTENT_KEY_CACHE_TTL_MS
	// WriteDeadline bounds a write's Postgres work, its commit's wait for the
	// synchronous standby included (statement_timeout does not cover that wait).
	WriteDeadline      time.Duration // LOOM_PG_WRITE_DEADLINE_MS
	ConflictThreshold  float64       // LOOM_CONFLICT_THRESHOLD: a peer at or above it is close
	DuplicateThreshold float64       // LOOM_DUPLICATE_THRESHOLD: a close peer at or above it may be a duplicate
	// ConflictCalibration moves the two thresholds per namespace by its recalibrated
	// score distribution (the recalibration pass; LOOM_CONFLICT_CALIBRATION_*).
	ConflictCalibration ConflictCalibration
	SensitiveRetention  time.Duration // LOOM_MEMORY_SENSITIVE_RETENTION_DAYS: how long a high row is kept
	PeerLimit           int           // LOOM_MEMORY_PEER_LIMIT: peers a write reads
	IdempotencyLease    time.Duration // LOOM_PG_REQUEST_LEASE_SECONDS: how long a request holds its Idempotency-Key
	// BulkConflictCheckMax is how many embedded entries of a bulk_set are judged
	// against the namespace's peers; every entry is judged against the batch.
	BulkConflictCheckMax int           // LOOM_BULK_CONFLICT_CHECK_MAX_ENTRIES
	SweepInterval        time.Duration // LOOM_SWEEP_INTERVAL_S: expiry, idempotency and erasure sweeps (0: none)
	// UsagePublishInterval is how often the command role publishes the usage counted
	// since (memory.touch, search's served hits, evidence events) as one
	// memory.usage_recorded record per namespace (command/usage_publish.go; 0: never).
	UsagePublishInterval time.Duration // LOOM_USAGE_PUBLISH_INTERVAL_MS
	// RecallPublishInterval is how long a memory's search recalls wait to be published
	// when nothing else of its usage is counted: each publication is a usage_fold
	// revision of the memory, and a search workload recalls the same memories again and
	// again (command/touches_store.go).
	RecallPublishInterval time.Duration // LOOM_USAGE_RECALL_INTERVAL_MS
	// RestoreBatchRows is how many rows one commit of namespace.restore, of
	// namespace.rollback and of a blacklist sweep writes.
	RestoreBatchRows int // LOOM_PG_RESTORE_BATCH_ROWS
	// SweepWait is how long a blacklist sweep waits, once its tombstones are
	// committed, for the serving projection to hold them before it answers.
	SweepWait time.Duration // LOOM_BLACKLIST_SWEEP_WAIT_MS
	// PeerReadDeadline bounds a write's peer read from ClickHouse. It is no setting of
	// its own: the wiring sets it from LOOM_CH_READ_DEADLINE_MS.
	PeerReadDeadline time.Duration
	Erasure          Erasure
	Extraction       Extraction
	Consolidate      Consolidate // memory.consolidate (profiles.go)
}

// Erasure tunes erasure.request, its saga and erasure_recovery.
type Erasure struct {
	Evidence         time.Duration // LOOM_PG_ERASURE_EVIDENCE_HOURS: how long an erased memory's stale writes are refused
	LedgerKeep       time.Duration // LOOM_ERASURE_LEDGER_DAYS: how long a finished saga is kept
	Lease            time.Duration // LOOM_ERASURE_LEASE_S: a saga runner's hold before erasure_recovery takes over
	MaxAttempts      int           // LOOM_ERASURE_MAX_ATTEMPTS: runs of a saga before it is marked failed
	StepTimeout      time.Duration // LOOM_ERASURE_STEP_TIMEOUT_MS: one step's wait per run
	RequestWait      time.Duration // LOOM_ERASURE_REQUEST_WAIT_MS: how long POST /v1/erasures waits for its saga
	RecoveryInterval time.Duration // LOOM_ERASURE_RECOVERY_INTERVAL_MS: how often erasure_recovery looks (0: never)
}

// Query is the read side: the barrier, search and its ranking.
type Query struct {
	ProjectionWait time.Duration // LOOM_PG_PROJECTION_WAIT_MS: the barrier's budget
	TopKDefault    int           // LOOM_SEARCH_TOP_K_DEFAULT
	TopKMax        int           // LOOM_SEARCH_TOP_K_MAX
	MinScore       float64       // LOOM_MEMORY_SEARCH_MIN_SCORE: below it a search abstains (below_threshold)
	PriorCap       float64       // LOOM_MEMORY_PRIOR_CAP: the most the prior group moves a hit's score (fraction)
	RecordRecalls  bool          // LOOM_SEARCH_RECALLS_ENABLED: count each memory a search serves, for recall_count
	BM25K1, BM25B  float64       // LOOM_BM25_K1, LOOM_BM25_B
	Weights        Weights       // weighted fusion's leg weights
	EmbedCacheSize int           // LOOM_EMBEDDING_CACHE_SIZE
	EmbedCacheTTL  time.Duration // LOOM_EMBEDDING_CACHE_TTL_S
	// PointReadDeadline and AfterBarrierDeadline bound a read (the point reads, and
	// what a read does after the barrier's wait). They are no settings of their own:
	// the wiring sets them from LOOM_PG_READ_DEADLINE_MS and LOOM_CH_READ_DEADLINE_MS.
	PointReadDeadline, AfterBarrierDeadline time.Duration
	Retrieval                               Retrieval
}

// Retrieval is how search plans, calibrates, grounds and reranks (the defaults a
// namespace's retrieval_defaults and a request override).
type Retrieval struct {
	// AdaptiveThresholds (LOOM_ADAPTIVE_THRESHOLDS) judges the best hit against the
	// background of the search's own pool (or its namespace's) instead of the scalar
	// LOOM_MEMORY_SEARCH_MIN_SCORE, which stays the fallback.
	AdaptiveThresholds bool
	MinDistinctness    float64       // LOOM_SEARCH_MIN_DISTINCTNESS: background spreads the best hit must stand out by
	Grounding          string        // LOOM_MEMORY_SEARCH_IDENTIFIER_GROUNDING: abstain, annotate or off
	SubQueries         bool          // LOOM_SEARCH_SUB_QUERIES: split multi-part questions
	SetExpansion       bool          // LOOM_SEARCH_SET_EXPANSION: search again for the names the best hits hold
	AnchorPool         bool          // LOOM_SEARCH_ANCHOR_POOL: add the rows said in a question's short spans of time
	LegPool            int           // LOOM_SEARCH_LEG_POOL: rows each leg ranks at least
	TraceTTL           time.Duration // LOOM_SEARCH_TRACE_TTL_S: how long a kept search trace is readable
	Reranker           string        // LOOM_SEARCH_RERANKER: "" (none), llm or cross_encoder
	RerankerURL        string        // LOOM_SEARCH_RERANKER_URL: the cross-encoder's rerank endpoint
	RerankerModel      string        // LOOM_SEARCH_RERANKER_MODEL: the model asked ("" = LOOM_LLM_MODEL for llm)
	RerankerAPIKey     string        // LOOM_SEARCH_RERANKER_API_KEY: the cross-encoder's bearer token
	RerankBudget       time.Duration // LOOM_SEARCH_RERANK_BUDGET_MS: the reranker's time; past it the fused order stands
	RerankDepth        int           // LOOM_SEARCH_RERANK_DEPTH: hits sent to the reranker at most
	// HyDE (LOOM_SEARCH_HYDE) has the model provider, when one is configured, write a
	// hypothetical answer whose embedding joins the query's in the vector leg; past
	// HyDEBudget (LOOM_SEARCH_HYDE_BUDGET_MS) or on any error the query's alone ranks.
	HyDE       bool
	HyDEBudget time.Duration
}

// Weights are weighted fusion's leg weights (LOOM_SEARCH_WEIGHT_VECTOR, _LEXICAL,
// _KEY, _GRAPH).
type Weights struct {
	Vector, Lexical, Key, Graph float64
}

// Relay is the outbox publisher.
type Relay struct {
	BatchRows   int           // LOOM_OUTBOX_BATCH_ROWS: rows per round
	MaxAttempts int           // LOOM_OUTBOX_MAX_ATTEMPTS: refusals before a record is parked
	Poll        time.Duration // LOOM_OUTBOX_POLL_MS: the fallback wake-up when no NOTIFY arrives
	// DurableWait (LOOM_RELAY_DURABLE_WAIT_MS) is how long a round waits for the
	// synchronous standbys to flush its batch before it ends with the batch held.
	DurableWait time.Duration
	// WaitForStandbys publishes a round only once the synchronous standbys flushed it.
	// It is no setting of its own: the wiring sets it from LOOM_PG_DURABILITY.
	WaitForStandbys bool
}

// Projector is the projection's consumers.
type Projector struct {
	BatchRows int           // LOOM_PROJECTOR_BATCH_ROWS: records per batch at most
	Interval  time.Duration // LOOM_PG_PUBLISH_INTERVAL_MS: at most one batch per interval (parts budget)
	// BusyInterval (LOOM_PROJECTOR_BUSY_INTERVAL_MS) is the interval while the topic
	// keeps the projector busy and it keeps up (projector/pace.go): fewer, larger
	// parts, for the ClickHouse projection a little staler under a steady load; at most
	// Interval: never stretched.
	BusyInterval   time.Duration
	Attempts       int           // LOOM_PROJECTOR_BATCH_ATTEMPTS: tries of a failing batch before it is split by namespace
	SessionTimeout time.Duration // LOOM_PROJECTOR_SESSION_TIMEOUT_MS: how soon a dead projector's partitions move
	RepairInterval time.Duration // LOOM_PROJECTOR_REPAIR_INTERVAL_MS: how often recorded failures are retried (0: never)

	// ReplayBatchRows (LOOM_PROJECTOR_REPLAY_BATCH_ROWS) is how many records a batch
	// takes at most when the records past it would fill BatchRows (a replay, a long
	// backlog): each batch costs a dozen round trips and a part per table, whatever
	// its size. Never fewer than BatchRows. 10,000 replayed 20,000 records 10-20% faster
	// than 5,000 on a quiet machine, with a third less ClickHouse CPU a record (fewer
	// parts and merges in the window; docs/bench/RESULTS-replay.md, seventh round).
	ReplayBatchRows int
	// ReplayBatchBytes (LOOM_PROJECTOR_REPLAY_BATCH_BYTES) bounds such a batch by its
	// records' bytes as fetched (keys and values); the batch's decoded content is
	// about as large again. 0: no bound but ReplayBatchRows.
	ReplayBatchBytes int64
}

// SearchIndex is the in-process search index: one more projection of the topic, held
// by every process that runs the command or the query role, read by search's vector,
// chunk, lexical and key legs and by memory.set's peer read.
type SearchIndex struct {
	// Mode (LOOM_SEARCH_INDEX) is where those reads go: memory (the index) or
	// clickhouse (the ClickHouse read models, as before the index).
	Mode SearchIndexMode
	// MaxBytes (LOOM_INDEX_MAX_BYTES) is the index's memory budget: past it the coldest
	// namespaces are dropped from memory and served by the ClickHouse path. 0: none.
	MaxBytes int64
	// BatchRecords (LOOM_INDEX_BATCH_RECORDS) is how many records the follower applies
	// at most per poll.
	BatchRecords int
	// FetchMaxWait (LOOM_INDEX_FETCH_MAX_WAIT_MS) is how long an idle fetch is held by
	// the broker; a fetch answers as soon as a record arrives.
	FetchMaxWait time.Duration
	// GraphMin (LOOM_INDEX_GRAPH_MIN) is how many value vectors a namespace holds before
	// it gets an approximate (HNSW) graph beside the exact scan; the knowledge chunk
	// index takes it for its chunk vectors.
	GraphMin int
	// CheckpointDir (LOOM_INDEX_CHECKPOINT_DIR) is where the process keeps a checkpoint
	// of its index, to warm from it and the topic's tail instead of the whole topic. "":
	// none (`loomd dev` keeps one under its --dir).
	CheckpointDir string
	// CheckpointInterval (LOOM_INDEX_CHECKPOINT_INTERVAL_S) is how often a checkpoint is
	// written while records arrive; one is also written after an erasure or a redaction
	// and at shutdown.
	CheckpointInterval time.Duration
}

// SearchIndexMode is where search and the peer read find their rows.
type SearchIndexMode string

// Search index modes.
const (
	SearchIndexMemory     SearchIndexMode = "memory"
	SearchIndexClickHouse SearchIndexMode = "clickhouse"
)

// Role is a part of Loom a process runs.
type Role string

// The roles. "api" is the older name of command + query (ParseRoles).
const (
	RoleCommand   Role = "command"
	RoleQuery     Role = "query"
	RoleRelay     Role = "relay"
	RoleProjector Role = "projector"
	// RoleWorkers runs the background model work: the conflict resolver and the
	// entity extractor, each a consumer group of the topic writing through the
	// command side's commit.
	RoleWorkers Role = "workers"
)

// Roles is the roles one process runs, in AllRoles order.
type Roles []Role

// AllRoles is every role, in the order a process starts them.
func AllRoles() Roles { return Roles{RoleCommand, RoleQuery, RoleRelay, RoleProjector, RoleWorkers} }

// Has reports whether r is among the roles.
func (rs Roles) Has(r Role) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

// String is the comma-separated list LOOM_ROLES and --roles take.
func (rs Roles) String() string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ",")
}

// Durability is what an acknowledged write survives (LOOM_PG_DURABILITY).
type Durability string

const (
	// DurabilitySynchronous requires a synchronous standby: a write survives the
	// primary's loss.
	DurabilitySynchronous Durability = "synchronous"
	// DurabilityLocal accepts one Postgres: a write survives a restart.
	DurabilityLocal Durability = "local"
)

// Lookup returns an environment variable's value, or "" when unset (os.Getenv).
type Lookup func(string) string

// Setting is one environment variable Load reads and its default as text ("" = none).
type Setting struct {
	Name, Default string
}

// Load reads every setting and validates the result; a malformed value is an error
// naming the variable.
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
	r := &reader{env: env}
	c := Config{
		Boot:        readBoot(r),
		HTTP:        readHTTP(r),
		Pipeline:    readPipeline(r),
		PG:          readPG(r),
		ClickHouse:  readClickHouse(r),
		Kafka:       readKafka(r),
		Embedder:    readEmbedder(r),
		Command:     readCommand(r),
		Query:       readQuery(r),
		Relay:       readRelay(r),
		Projector:   readProjector(r),
		SearchIndex: readSearchIndex(r),
		LLM:         readLLM(r),
		Adapters:    readAdapters(r),
		Tracing:     readTracing(r),
		Keys:        readKeys(r),
		Runtime:     readRuntime(r),
		LogLevel:    r.str("LOOM_LOG_LEVEL", "info"),
	}
	c.Workers = readWorkers(r, c.LLM)
	roles, err := ParseRoles(r.str("LOOM_ROLES", AllRoles().String()))
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("LOOM_ROLES: %w", err))
	}
	c.Roles = roles
	refuseTableRetention(r)
	if len(r.errs) > 0 {
		return c, r.settings, errors.Join(r.errs...)
	}
	return c, r.settings, c.Validate()
}

// refuseTableRetention refuses the ClickHouse table-retention settings of the memory
// tables at boot (postgres-authority.md, "Retention"): a table TTL on loom.memory or
// loom.memory_embeddings would delete ClickHouse's copies alone while Postgres, the
// authority, keeps the rows, so search and the heads would disagree for ever. A row's
// lifetime is its expires_at (a namespace's or type's retention_days, ttl_seconds),
// which the expiry sweep turns into revisions every store applies.
func refuseTableRetention(r *reader) {
	for _, name := range []string{"LOOM_RETENTION_MEMORY_DAYS", "LOOM_RETENTION_MEMORY_EMBEDDINGS_DAYS"} {
		if r.raw(name, "") != "" {
			r.errs = append(r.errs, fmt.Errorf("%s is refused: a ClickHouse table TTL would delete the read model's copies "+
				"while Postgres keeps the rows; unset it and give the namespace (or its memory types) a retention_days instead", name))
		}
	}
}

func readBoot(r *reader) Boot {
	return Boot{Migrate: r.bool("LOOM_BOOT_MIGRATE", true), DeploymentID: r.str("LOOM_DEPLOYMENT_ID", "")}
}

func readHTTP(r *reader) HTTP {
	return HTTP{Addr: r.str("LOOM_HTTP_ADDR", ":8080"), BodyLimitBytes: r.int("LOOM_HTTP_BODY_LIMIT_BYTES", 8<<20),
		TokenCache: r.ms("LOOM_AUTH_TOKEN_CACHE_MS", 10000), PprofAddr: r.str("LOOM_PPROF_ADDR", "")}
}

func readPipeline(r *reader) Pipeline {
	return Pipeline{
		Topic:         r.str("LOOM_TOPIC", events.DefaultTopic),
		EventSource:   r.str("LOOM_EVENT_SOURCE", "loom"),
		Projection:    r.str("LOOM_PROJECTION", "main"),
		ShutdownGrace: r.ms("LOOM_SHUTDOWN_GRACE_MS", 20000),
	}
}

func readPG(r *reader) PG {
	return PG{
		DSN:              r.str("LOOM_PG_DSN", ""),
		Durability:       Durability(r.str("LOOM_PG_DURABILITY", string(DurabilitySynchronous))),
		PoolMin:          int32(r.int("LOOM_PG_POOL_MIN_SIZE", 2)),
		PoolMax:          int32(r.int("LOOM_PG_POOL_MAX_SIZE", 40)),
		StatementTimeout: r.ms("LOOM_PG_STATEMENT_TIMEOUT_MS", 10000),
		ReadDeadline:     r.ms("LOOM_PG_READ_DEADLINE_MS", 5000),
	}
}

func readClickHouse(r *reader) ClickHouse {
	return ClickHouse{
		Addr:         r.list("LOOM_CH_ADDR", ""),
		User:         r.str("LOOM_CH_USER", "default"),
		Password:     r.str("LOOM_CH_PASSWORD", ""),
		Cluster:      r.str("LOOM_CH_CLUSTER", ""),
		ReadTimeout:  r.ms("LOOM_CH_READ_TIMEOUT_MS", 60000),
		ReadDeadline: r.ms("LOOM_CH_READ_DEADLINE_MS", 5000),
	}
}

func readKafka(r *reader) Kafka {
	return Kafka{
		Brokers:          r.list("LOOM_KAFKA_BROKERS", ""),
		TopicPartitions:  int32(r.int("LOOM_TOPIC_PARTITIONS", 8)),
		TopicReplication: int16(r.int("LOOM_TOPIC_REPLICATION", -1)),
		MaxRecordBytes:   r.int("LOOM_TOPIC_MAX_RECORD_BYTES", kafka.DefaultMaxRecordBytes),
	}
}

func readEmbedder(r *reader) Embedder {
	return Embedder{
		Kind: r.str("LOOM_EMBEDDER", "hash"),
		Dim:  r.int("LOOM_EMBEDDER_DIM", 384),
		OpenAI: OpenAI{
			BaseURL: r.str("LOOM_OPENAI_BASE_URL", "https://api.openai.com"),
			APIKey:  r.str("LOOM_OPENAI_API_KEY", ""),
			Model:   r.str("LOOM_OPENAI_MODEL", "text-embedding-3-small"),
		},
	}
}

func readCommand(r *reader) Command {
	return Command{
		CharLimit:          r.int("LOOM_MEMORY_CHAR_LIMIT", memrow.DefaultCharLimit),
		AdmissionRounds:    r.int("LOOM_PG_ADMISSION_ROUNDS", 8),
		AdmissionDeadline:  r.ms("LOOM_PG_ADMISSION_DEADLINE_MS", 3000),
		AdmissionGapMax:    r.int("LOOM_PG_ADMISSION_GAP_MAX", 500),
		CommitLockTimeout:  r.ms("LOOM_PG_COMMIT_LOCK_TIMEOUT_MS", 5000),
		ContentKeyTTL:      r.ms("LOOM_CONTENT_KEY_CACHE_TTL_MS", 60000),
		WriteDeadline:      r.ms("LOOM_PG_WRITE_DEADLINE_MS", 15000),
		ConflictThreshold:  r.float("LOOM_CONFLICT_THRESHOLD", 0.80),
		DuplicateThreshold: r.float("LOOM_DUPLICATE_THRESHOLD", 0.92),
		ConflictCalibration: ConflictCalibration{Enabled: r.bool("LOOM_CONFLICT_CALIBRATION_ENABLED", true),
			Baseline: r.float("LOOM_CONFLICT_CALIBRATION_BASELINE", 0.09), MaxShift: r.float("LOOM_CONFLICT_CALIBRATION_MAX_SHIFT", 0.05)},
		SensitiveRetention:    r.days("LOOM_MEMORY_SENSITIVE_RETENTION_DAYS", 30),
		PeerLimit:             r.int("LOOM_MEMORY_PEER_LIMIT", 16),
		IdempotencyLease:      r.seconds("LOOM_PG_REQUEST_LEASE_SECONDS", 60),
		BulkConflictCheckMax:  r.int("LOOM_BULK_CONFLICT_CHECK_MAX_ENTRIES", 100),
		SweepInterval:         r.seconds("LOOM_SWEEP_INTERVAL_S", 30),
		UsagePublishInterval:  r.ms("LOOM_USAGE_PUBLISH_INTERVAL_MS", 5000),
		RecallPublishInterval: r.ms("LOOM_USAGE_RECALL_INTERVAL_MS", 60000),
		RestoreBatchRows:      r.int("LOOM_PG_RESTORE_BATCH_ROWS", 500),
		SweepWait:             r.ms("LOOM_BLACKLIST_SWEEP_WAIT_MS", 5000),
		Erasure: Erasure{
			Evidence:         time.Duration(r.int("LOOM_PG_ERASURE_EVIDENCE_HOURS", 720)) * time.Hour,
			LedgerKeep:       r.days("LOOM_ERASURE_LEDGER_DAYS", 365),
			Lease:            r.seconds("LOOM_ERASURE_LEASE_S", 120),
			MaxAttempts:      r.int("LOOM_ERASURE_MAX_ATTEMPTS", 10),
			StepTimeout:      r.ms("LOOM_ERASURE_STEP_TIMEOUT_MS", 60000),
			RequestWait:      r.ms("LOOM_ERASURE_REQUEST_WAIT_MS", 20000),
			RecoveryInterval: r.ms("LOOM_ERASURE_RECOVERY_INTERVAL_MS", 10000),
		},
		Extraction:  readExtraction(r),
		Consolidate: readConsolidate(r),
	}
}

func readQuery(r *reader) Query {
	return Query{
		ProjectionWait: r.ms("LOOM_PG_PROJECTION_WAIT_MS", 5000),
		TopKDefault:    r.int("LOOM_SEARCH_TOP_K_DEFAULT", 10),
		TopKMax:        r.int("LOOM_SEARCH_TOP_K_MAX", 100),
		MinScore:       r.float("LOOM_MEMORY_SEARCH_MIN_SCORE", 0.3),
		PriorCap:       r.float("LOOM_MEMORY_PRIOR_CAP", 0.05),
		RecordRecalls:  r.bool("LOOM_SEARCH_RECALLS_ENABLED", true),
		BM25K1:         r.float("LOOM_BM25_K1", 1.2),
		BM25B:          r.float("LOOM_BM25_B", 0.75),
		Weights: Weights{
			Vector:  r.float("LOOM_SEARCH_WEIGHT_VECTOR", 0.30),
			Lexical: r.float("LOOM_SEARCH_WEIGHT_LEXICAL", 0.40),
			Key:     r.float("LOOM_SEARCH_WEIGHT_KEY", 0.30),
			Graph:   r.float("LOOM_SEARCH_WEIGHT_GRAPH", 0.20),
		},
		EmbedCacheSize: r.int("LOOM_EMBEDDING_CACHE_SIZE", 4096),
		EmbedCacheTTL:  r.seconds("LOOM_EMBEDDING_CACHE_TTL_S", 600),
		Retrieval: Retrieval{
			AdaptiveThresholds: r.bool("LOOM_ADAPTIVE_THRESHOLDS", true),
			MinDistinctness:    r.float("LOOM_SEARCH_MIN_DISTINCTNESS", 1.62),
			Grounding:          r.str("LOOM_MEMORY_SEARCH_IDENTIFIER_GROUNDING", "abstain"),
			SubQueries:         r.bool("LOOM_SEARCH_SUB_QUERIES", false),
			SetExpansion:       r.bool("LOOM_SEARCH_SET_EXPANSION", true),
			AnchorPool:         r.bool("LOOM_SEARCH_ANCHOR_POOL", true),
			LegPool:            r.int("LOOM_SEARCH_LEG_POOL", 200),
			TraceTTL:           r.seconds("LOOM_SEARCH_TRACE_TTL_S", 900),
			Reranker:           r.str("LOOM_SEARCH_RERANKER", ""),
			RerankerURL:        r.str("LOOM_SEARCH_RERANKER_URL", ""),
			RerankerModel:      r.str("LOOM_SEARCH_RERANKER_MODEL", ""),
			RerankerAPIKey:     r.str("LOOM_SEARCH_RERANKER_API_KEY", ""),
			RerankBudget:       r.ms("LOOM_SEARCH_RERANK_BUDGET_MS", 1500),
			RerankDepth:        r.int("LOOM_SEARCH_RERANK_DEPTH", 20),
			HyDE:               r.bool("LOOM_SEARCH_HYDE", false),
			HyDEBudget:         r.ms("LOOM_SEARCH_HYDE_BUDGET_MS", 1500),
		},
	}
}

func readRelay(r *reader) Relay {
	return Relay{
		BatchRows:   r.int("LOOM_OUTBOX_BATCH_ROWS", 500),
		MaxAttempts: r.int("LOOM_OUTBOX_MAX_ATTEMPTS", 10),
		Poll:        r.ms("LOOM_OUTBOX_POLL_MS", 1000),
		DurableWait: r.ms("LOOM_RELAY_DURABLE_WAIT_MS", 1000),
	}
}

func readProjector(r *reader) Projector {
	return Projector{
		BatchRows:      r.int("LOOM_PROJECTOR_BATCH_ROWS", 5000),
		Interval:       r.ms("LOOM_PG_PUBLISH_INTERVAL_MS", 250),
		BusyInterval:   r.ms("LOOM_PROJECTOR_BUSY_INTERVAL_MS", 1000),
		Attempts:       r.int("LOOM_PROJECTOR_BATCH_ATTEMPTS", 3),
		SessionTimeout: r.ms("LOOM_PROJECTOR_SESSION_TIMEOUT_MS", 45000),
		RepairInterval: r.ms("LOOM_PROJECTOR_REPAIR_INTERVAL_MS", 30000),

		ReplayBatchRows:  r.int("LOOM_PROJECTOR_REPLAY_BATCH_ROWS", 10000),
		ReplayBatchBytes: int64(r.int("LOOM_PROJECTOR_REPLAY_BATCH_BYTES", 96<<20)),
	}
}

func readSearchIndex(r *reader) SearchIndex {
	return SearchIndex{
		Mode:               SearchIndexMode(r.str("LOOM_SEARCH_INDEX", string(SearchIndexMemory))),
		MaxBytes:           int64(r.int("LOOM_INDEX_MAX_BYTES", 0)),
		BatchRecords:       r.int("LOOM_INDEX_BATCH_RECORDS", 5000),
		FetchMaxWait:       r.ms("LOOM_INDEX_FETCH_MAX_WAIT_MS", 100),
		GraphMin:           r.int("LOOM_INDEX_GRAPH_MIN", 20000),
		CheckpointDir:      r.str("LOOM_INDEX_CHECKPOINT_DIR", ""),
		CheckpointInterval: time.Duration(r.int("LOOM_INDEX_CHECKPOINT_INTERVAL_S", 300)) * time.Second,
	}
}

// ParseRoles reads a comma-separated role list: unknown names are refused, "api"
// stands for command and query, duplicates collapse, and the result is in AllRoles order.
func ParseRoles(list string) (Roles, error) {
	want := map[Role]bool{}
	for _, name := range strings.Split(list, ",") {
		switch r := Role(strings.TrimSpace(name)); r {
		case "":
		case "api":
			want[RoleCommand], want[RoleQuery] = true, true
		case RoleCommand, RoleQuery, RoleRelay, RoleProjector, RoleWorkers:
			want[r] = true
		default:
			return nil, fmt.Errorf("unknown role %q (command, query, relay, projector, workers; api = command,query)", r)
		}
	}
	var out Roles
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

// Validate checks every section.
func (c Config) Validate() error {
	return errors.Join(c.HTTP.Validate(), c.Pipeline.Validate(), c.Kafka.Validate(), c.PG.Validate(), c.ClickHouse.Validate(), c.Embedder.Validate(),
		c.Command.Validate(), c.Query.Validate(), c.Relay.Validate(), c.Projector.Validate(), c.SearchIndex.Validate(), c.LLM.Validate(), c.Workers.Validate(), c.Adapters.Validate(), c.Tracing.Validate(), c.Keys.Validate(), c.Runtime.Validate())
}

// Validate checks the listener.
func (h HTTP) Validate() error {
	if h.BodyLimitBytes < 1 {
		return errors.New("LOOM_HTTP_BODY_LIMIT_BYTES must be positive")
	}
	if h.TokenCache <= 0 {
		return errors.New("LOOM_AUTH_TOKEN_CACHE_MS must be positive")
	}
	return nil
}

// Validate checks the topic's shape.
func (k Kafka) Validate() error {
	if k.MaxRecordBytes < kafka.MinMaxRecordBytes {
		return fmt.Errorf("LOOM_TOPIC_MAX_RECORD_BYTES must be at least %d (Kafka's own default message size)", kafka.MinMaxRecordBytes)
	}
	return nil
}

// Validate checks what the roles share.
func (p Pipeline) Validate() error {
	var errs []error
	if p.ShutdownGrace <= 0 {
		errs = append(errs, errors.New("LOOM_SHUTDOWN_GRACE_MS must be positive"))
	}
	if err := memrow.ValidateName("LOOM_PROJECTION", p.Projection); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Validate checks the Postgres settings.
func (p PG) Validate() error {
	var errs []error
	switch p.Durability {
	case DurabilitySynchronous, DurabilityLocal:
	default:
		errs = append(errs, fmt.Errorf("LOOM_PG_DURABILITY: unknown mode %q (synchronous, local)", p.Durability))
	}
	if p.PoolMax < 1 || p.PoolMin < 0 || p.PoolMin > p.PoolMax {
		errs = append(errs, errors.New("LOOM_PG_POOL_MIN_SIZE and LOOM_PG_POOL_MAX_SIZE must satisfy 0 <= min <= max, max >= 1"))
	}
	if p.ReadDeadline <= 0 {
		errs = append(errs, errors.New("LOOM_PG_READ_DEADLINE_MS must be positive"))
	}
	return errors.Join(errs...)
}

// Validate checks the ClickHouse settings.
func (c ClickHouse) Validate() error {
	if c.ReadDeadline <= 0 {
		return errors.New("LOOM_CH_READ_DEADLINE_MS must be positive")
	}
	return nil
}

// Validate checks the embedder.
func (e Embedder) Validate() error {
	var errs []error
	switch e.Kind {
	case "hash", "openai":
	default:
		errs = append(errs, fmt.Errorf("LOOM_EMBEDDER: unknown embedder %q (hash, openai)", e.Kind))
	}
	if e.Dim < 1 {
		errs = append(errs, errors.New("LOOM_EMBEDDER_DIM must be positive"))
	}
	return errors.Join(errs...)
}

// Validate checks the write side's settings.
func (c Command) Validate() error {
	var errs []error
	if c.CharLimit < 1 {
		errs = append(errs, errors.New("LOOM_MEMORY_CHAR_LIMIT must be positive"))
	}
	if c.AdmissionRounds < 1 || c.AdmissionGapMax < 1 || c.PeerLimit < 1 || c.BulkConflictCheckMax < 1 {
		errs = append(errs, errors.New("LOOM_PG_ADMISSION_ROUNDS, LOOM_PG_ADMISSION_GAP_MAX, LOOM_MEMORY_PEER_LIMIT and LOOM_BULK_CONFLICT_CHECK_MAX_ENTRIES must be positive"))
	}
	if c.RestoreBatchRows < 1 || c.RestoreBatchRows > 10000 {
		errs = append(errs, errors.New("LOOM_PG_RESTORE_BATCH_ROWS must be between 1 and 10000"))
	}
	if c.WriteDeadline <= 0 || c.IdempotencyLease <= 0 {
		errs = append(errs, errors.New("LOOM_PG_WRITE_DEADLINE_MS and LOOM_PG_REQUEST_LEASE_SECONDS must be positive"))
	}
	if c.ConflictThreshold <= 0 || c.ConflictThreshold > 1 || c.DuplicateThreshold < c.ConflictThreshold || c.DuplicateThreshold > 1 {
		errs = append(errs, errors.New("LOOM_CONFLICT_THRESHOLD and LOOM_DUPLICATE_THRESHOLD must satisfy 0 < conflict <= duplicate <= 1"))
	}
	if cc := c.ConflictCalibration; cc.Baseline <= -1 || cc.Baseline >= 1 || cc.MaxShift < 0 || cc.MaxShift > 0.5 {
		errs = append(errs, errors.New("LOOM_CONFLICT_CALIBRATION_BASELINE must lie in (-1, 1) and LOOM_CONFLICT_CALIBRATION_MAX_SHIFT in [0, 0.5]"))
	}
	if c.SweepWait < 0 {
		errs = append(errs, errors.New("LOOM_BLACKLIST_SWEEP_WAIT_MS must not be negative"))
	}
	if c.SweepInterval < 0 {
		errs = append(errs, errors.New("LOOM_SWEEP_INTERVAL_S must not be negative"))
	}
	if c.UsagePublishInterval < 0 {
		errs = append(errs, errors.New("LOOM_USAGE_PUBLISH_INTERVAL_MS must not be negative"))
	}
	if c.RecallPublishInterval < 0 {
		errs = append(errs, errors.New("LOOM_USAGE_RECALL_INTERVAL_MS must not be negative"))
	}
	if c.ContentKeyTTL < 0 {
		errs = append(errs, errors.New("LOOM_CONTENT_KEY_CACHE_TTL_MS must not be negative"))
	}
	return errors.Join(append(errs, c.Erasure.Validate(), c.Extraction.Validate(), c.Consolidate.Validate())...)
}

// Validate checks the erasure settings.
func (e Erasure) Validate() error {
	var errs []error
	if e.Evidence <= 0 || e.LedgerKeep <= 0 || e.Lease <= 0 || e.MaxAttempts < 1 || e.StepTimeout <= 0 || e.RequestWait <= 0 {
		errs = append(errs, errors.New("LOOM_PG_ERASURE_EVIDENCE_HOURS, LOOM_ERASURE_LEDGER_DAYS, LOOM_ERASURE_LEASE_S, LOOM_ERASURE_MAX_ATTEMPTS, "+
			"LOOM_ERASURE_STEP_TIMEOUT_MS and LOOM_ERASURE_REQUEST_WAIT_MS must be positive"))
	}
	if e.RecoveryInterval < 0 {
		errs = append(errs, errors.New("LOOM_ERASURE_RECOVERY_INTERVAL_MS must not be negative"))
	}
	return errors.Join(errs...)
}

// Validate checks the read side's settings.
func (q Query) Validate() error {
	var errs []error
	if q.ProjectionWait <= 0 {
		errs = append(errs, errors.New("LOOM_PG_PROJECTION_WAIT_MS must be positive"))
	}
	if q.TopKDefault < 1 || q.TopKMax < q.TopKDefault {
		errs = append(errs, errors.New("LOOM_SEARCH_TOP_K_DEFAULT must be at least 1 and at most LOOM_SEARCH_TOP_K_MAX"))
	}
	w := q.Weights
	if w.Vector < 0 || w.Lexical < 0 || w.Key < 0 || w.Graph < 0 || w.Vector+w.Lexical+w.Key <= 0 {
		errs = append(errs, errors.New("LOOM_SEARCH_WEIGHT_VECTOR, _LEXICAL and _KEY must be non-negative and not all zero"))
	}
	errs = append(errs, q.Retrieval.Validate())
	return errors.Join(errs...)
}

// Validate checks the retrieval settings.
func (r Retrieval) Validate() error {
	var errs []error
	if r.MinDistinctness < 0 || r.MinDistinctness > 10 {
		errs = append(errs, errors.New("LOOM_SEARCH_MIN_DISTINCTNESS must be in [0, 10]"))
	}
	switch r.Grounding {
	case "abstain", "annotate", "off":
	default:
		errs = append(errs, fmt.Errorf("LOOM_MEMORY_SEARCH_IDENTIFIER_GROUNDING: %q is not abstain, annotate or off", r.Grounding))
	}
	if r.LegPool < 10 || r.LegPool > 2000 {
		errs = append(errs, errors.New("LOOM_SEARCH_LEG_POOL must be between 10 and 2000"))
	}
	if r.TraceTTL <= 0 || r.RerankBudget <= 0 || r.RerankDepth < 1 || r.RerankDepth > 100 {
		errs = append(errs, errors.New("LOOM_SEARCH_TRACE_TTL_S and LOOM_SEARCH_RERANK_BUDGET_MS must be positive, LOOM_SEARCH_RERANK_DEPTH 1 to 100"))
	}
	switch r.Reranker {
	case "", "llm":
	case "cross_encoder":
		if u, err := url.Parse(r.RerankerURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("LOOM_SEARCH_RERANKER_URL: %q is not an http:// or https:// URL (required with LOOM_SEARCH_RERANKER=cross_encoder)", r.RerankerURL))
		}
	default:
		errs = append(errs, fmt.Errorf("LOOM_SEARCH_RERANKER: %q is not llm or cross_encoder", r.Reranker))
	}
	return errors.Join(errs...)
}

// Validate checks the relay's settings.
func (r Relay) Validate() error {
	if r.BatchRows < 1 || r.MaxAttempts < 1 || r.Poll <= 0 || r.DurableWait <= 0 {
		return errors.New("LOOM_OUTBOX_BATCH_ROWS, LOOM_OUTBOX_MAX_ATTEMPTS, LOOM_OUTBOX_POLL_MS and LOOM_RELAY_DURABLE_WAIT_MS must be positive")
	}
	return nil
}

// Validate checks the projector's settings.
func (p Projector) Validate() error {
	var errs []error
	if p.BatchRows < 1 || p.ReplayBatchRows < 1 || p.Attempts < 1 || p.SessionTimeout <= 0 {
		errs = append(errs, errors.New("LOOM_PROJECTOR_BATCH_ROWS, LOOM_PROJECTOR_REPLAY_BATCH_ROWS, LOOM_PROJECTOR_BATCH_ATTEMPTS and LOOM_PROJECTOR_SESSION_TIMEOUT_MS must be positive"))
	}
	if p.Interval < 0 || p.BusyInterval < 0 || p.ReplayBatchBytes < 0 {
		errs = append(errs, errors.New("LOOM_PG_PUBLISH_INTERVAL_MS, LOOM_PROJECTOR_BUSY_INTERVAL_MS and LOOM_PROJECTOR_REPLAY_BATCH_BYTES must not be negative"))
	}
	if p.RepairInterval < 0 {
		errs = append(errs, errors.New("LOOM_PROJECTOR_REPAIR_INTERVAL_MS must not be negative"))
	}
	return errors.Join(errs...)
}

// Validate checks the search index's settings.
func (x SearchIndex) Validate() error {
	var errs []error
	switch x.Mode {
	case SearchIndexMemory, SearchIndexClickHouse:
	default:
		errs = append(errs, fmt.Errorf("LOOM_SEARCH_INDEX: unknown mode %q (memory, clickhouse)", x.Mode))
	}
	if x.MaxBytes < 0 {
		errs = append(errs, errors.New("LOOM_INDEX_MAX_BYTES must not be negative"))
	}
	if x.BatchRecords < 1 || x.FetchMaxWait <= 0 || x.GraphMin < 1 || x.CheckpointInterval <= 0 {
		errs = append(errs, errors.New("LOOM_INDEX_BATCH_RECORDS, LOOM_INDEX_FETCH_MAX_WAIT_MS, LOOM_INDEX_GRAPH_MIN and LOOM_INDEX_CHECKPOINT_INTERVAL_S must be positive"))
	}
	return errors.Join(errs...)
}

// RequireStores refuses to start without the stores and the key-encryption key: only
// `loomd dev` starts embedded ones (and makes a KEK).
func (c Config) RequireStores() error {
	var missing []string
	if c.PG.DSN == "" {
		missing = append(missing, "LOOM_PG_DSN")
	}
	if len(c.ClickHouse.Addr) == 0 {
		missing = append(missing, "LOOM_CH_ADDR")
	}
	if len(c.Kafka.Brokers) == 0 {
		missing = append(missing, "LOOM_KAFKA_BROKERS")
	}
	if c.Keys.KEK == "" {
		missing = append(missing, "LOOM_KEK")
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

func (r *reader) seconds(name string, def int) time.Duration {
	return time.Duration(r.int(name, def)) * time.Second
}

func (r *reader) days(name string, def int) time.Duration {
	return time.Duration(r.int(name, def)) * 24 * time.Hour
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

func readLLM(r *reader) LLM {
	return LLM{
		BaseURL:               r.str("LOOM_LLM_BASE_URL", ""),
		APIKey:                r.str("LOOM_LLM_API_KEY", ""),
		Model:                 r.str("LOOM_LLM_MODEL", ""),
		ExtractionModel:       r.str("LOOM_EXTRACTION_MODEL", ""),
		ConflictResolverModel: r.str("LOOM_CONFLICT_RESOLVER_MODEL", ""),
		AskModel:              r.str("LOOM_ASK_MODEL", ""),
		EntityExtractorModel:  r.str("LOOM_ENTITY_EXTRACTOR_MODEL", ""),
		EmbeddingModel:        r.str("LOOM_LLM_EMBEDDING_MODEL", "text-embedding-3-small"),
		ReasoningEffort:       r.str("LOOM_LLM_OPENAI_REASONING_EFFORT", ""),
		Timeout:               r.ms("LOOM_LLM_TIMEOUT_MS", 60000),
		Concurrency:           r.int("LOOM_LLM_CONCURRENCY", 8),
		MaxAttempts:           r.int("LOOM_LLM_MAX_ATTEMPTS", 3),
		RetryBase:             r.ms("LOOM_LLM_RETRY_BASE_MS", 500),
		Prices:                r.prices("LOOM_LLM_PRICES", defaultLLMPrices),
		DefaultPrice:          r.price("LOOM_LLM_DEFAULT_PRICE", defaultLLMPrice),
		DailyCostCapUSD:       r.float("LOOM_DEFAULT_DAILY_COST_CAP_USD", 1),
		ResolverCapShare:      r.float("LOOM_MEMORY_CONFLICT_RESOLVER_CAP_SHARE", 0.25),
	}
}

// Adapters are the agent-facing facades over the REST API: the MCP server (/mcp) and
// the mem0-compatible API (/mem0).
type Adapters struct {
	UpstreamURL   string // LOOM_ADAPTER_UPSTREAM_URL: the REST API /mcp and /mem0 call ("" = this process's)
	Mem0Namespace string // LOOM_MEM0_NAMESPACE: the namespace of mem0 memories without an app_id
	Mem0Infer     string // LOOM_MEM0_INFER: what a mem0 add with infer=true does: extract, refuse or verbatim
}

func readAdapters(r *reader) Adapters {
	return Adapters{
		UpstreamURL:   r.str("LOOM_ADAPTER_UPSTREAM_URL", ""),
		Mem0Namespace: r.str("LOOM_MEM0_NAMESPACE", "mem0"),
		Mem0Infer:     r.str("LOOM_MEM0_INFER", "extract"),
	}
}

// Validate checks the adapters' settings.
func (a Adapters) Validate() error {
	var errs []error
	if err := memrow.ValidateName("LOOM_MEM0_NAMESPACE", a.Mem0Namespace); err != nil {
		errs = append(errs, err)
	}
	switch a.Mem0Infer {
	case "extract", "refuse", "verbatim":
	default:
		errs = append(errs, fmt.Errorf("LOOM_MEM0_INFER: unknown mode %q (extract, refuse, verbatim)", a.Mem0Infer))
	}
	return errors.Join(errs...)
}
