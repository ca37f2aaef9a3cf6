package client

import "time"

// NamespaceConfig is a namespace's write configuration (schema NamespaceConfig): the
// body of namespace.configure and `config` in the namespace answers.
type NamespaceConfig struct {
	ConflictPolicy    string                `json:"conflict_policy,omitempty"`
	ConflictThreshold float64               `json:"conflict_threshold,omitempty"`
	RetentionDays     int                   `json:"retention_days,omitempty"`
	OnExpire          string                `json:"on_expire,omitempty"`
	Types             map[string]TypeConfig `json:"types,omitempty"`
	Relations         map[string]string     `json:"relations,omitempty"`
	// DailyCostCapUSD is what the namespace may spend on model calls a UTC day (nil:
	// the server's LOOM_DEFAULT_DAILY_COST_CAP_USD).
	DailyCostCapUSD *float64 `json:"daily_cost_cap_usd,omitempty"`
	// RetrievalDefaults are the namespace's search settings (schema RetrievalSettings).
	RetrievalDefaults *RetrievalSettings `json:"retrieval_defaults,omitempty"`
	// ProfileConsolidation opts the namespace in to the profile_consolidation pass (a
	// profile section of each user's preferences and decisions, served by RenderProfile).
	ProfileConsolidation bool `json:"profile_consolidation,omitempty"`
	// ReflectionDistill opts the namespace in to the reflection_distill pass (an outcome
	// label of each quiet session and reflections, type reflection, that a search
	// serves only when its memory_type asks for them).
	ReflectionDistill bool `json:"reflection_distill,omitempty"`
}

// RetrievalSettings are search settings: a namespace's retrieval_defaults, or the
// same fields of a SearchRequest over them. An unset field leaves the layer below.
type RetrievalSettings struct {
	Recipe          string            `json:"recipe,omitempty"` // default, precise, broad, recent
	Legs            []string          `json:"legs,omitempty"`   // vector, lexical, key, graph
	Weights         *RetrievalWeights `json:"weights,omitempty"`
	Pool            int               `json:"pool,omitempty"`
	MinScore        *float64          `json:"min_score,omitempty"`
	MinDistinctness *float64          `json:"min_distinctness,omitempty"`
	Grounding       string            `json:"grounding,omitempty"` // abstain, annotate, off
	Rerank          *bool             `json:"rerank,omitempty"`
	SubQueries      *bool             `json:"sub_queries,omitempty"`
	SetExpansion    *bool             `json:"set_expansion,omitempty"`
	AnchorPool      *bool             `json:"anchor_pool,omitempty"`
	Recency         *bool             `json:"recency,omitempty"`
	// Evidence runs the search route's evidence legs unless a request says false.
	Evidence *bool `json:"evidence,omitempty"`
	// EvidenceLegs names the evidence legs that run (turns, digests, entities).
	EvidenceLegs []string `json:"evidence_legs,omitempty"`
}

// RetrievalWeights are weighted fusion's leg weights; a nil weight is not set.
type RetrievalWeights struct {
	Vector  *float64 `json:"vector,omitempty"`
	Lexical *float64 `json:"lexical,omitempty"`
	Key     *float64 `json:"key,omitempty"`
	Graph   *float64 `json:"graph,omitempty"`
}

// TypeConfig is one memory type's configuration within a namespace.
type TypeConfig struct {
	Retype         string  `json:"retype,omitempty"`
	DedupThreshold float64 `json:"dedup_threshold,omitempty"`
	CharLimit      int     `json:"char_limit,omitempty"`
	RetentionDays  int     `json:"retention_days,omitempty"`
	OnExpire       string  `json:"on_expire,omitempty"`
}

// NamespaceAnswer is what the namespace and blacklist routes answer.
type NamespaceAnswer struct {
	Namespace        string          `json:"namespace"`
	Config           NamespaceConfig `json:"config"`
	Blacklist        []string        `json:"blacklist"`
	PolicyGeneration int64           `json:"policy_generation"`
	// Sweep is blacklist.add's sweep of the new pattern; SweepError says why it did
	// not finish (the pattern is kept).
	Sweep      *SweepReport `json:"sweep,omitempty"`
	SweepError string       `json:"sweep_error,omitempty"`
}

// ErasureRequest is erasure.request's scope: exactly one of a user in a namespace, a
// user across the org, or namespaces.
type ErasureRequest struct {
	UserID     string   `json:"user_id,omitempty"`
	Namespace  string   `json:"namespace,omitempty"`
	Namespaces []string `json:"namespaces,omitempty"`
	Purge      bool     `json:"purge,omitempty"`
}

// Erasure is an erasure saga as its ledger row holds it.
type Erasure struct {
	ID     string `json:"id"`
	Status string `json:"status"` // running, completed, failed
	Scope  struct {
		Kind       string   `json:"kind"`
		UserID     string   `json:"user_id,omitempty"`
		Namespace  string   `json:"namespace,omitempty"`
		Namespaces []string `json:"namespaces,omitempty"`
	} `json:"scope"`
	Purge bool   `json:"purge"`
	Actor string `json:"actor"`
	Steps []struct {
		Name        string     `json:"name"`
		CompletedAt *time.Time `json:"completed_at"`
		Reopened    int        `json:"reopened,omitempty"`
	} `json:"steps"`
	Fences       map[string]int64 `json:"fences"`
	Removed      map[string]int64 `json:"removed"`
	Attempts     int              `json:"attempts"`
	LastError    string           `json:"last_error,omitempty"`
	Residue      map[string]int64 `json:"residue"`
	ResidueCount *int64           `json:"residue_count"`
	Census       map[string]int64 `json:"census"`
	RequestedAt  time.Time        `json:"requested_at"`
	VerifiedAt   *time.Time       `json:"verified_at,omitempty"`
	FinishedAt   *time.Time       `json:"finished_at,omitempty"`
	// Running is true when the request answered 202: the saga still runs.
	Running bool `json:"-"`
}

// EntityOptions shape graph.entity's answer.
type EntityOptions struct {
	AsOf          time.Time // the graph holding at that time (zero: now)
	IncludeClosed bool
	Edges         int // 0..100; 0 sends none (the server's default 10)
}

// EntityAnswer is an entity of the graph.
type EntityAnswer struct {
	Namespace string      `json:"namespace"`
	Name      string      `json:"name"`
	Type      string      `json:"type,omitempty"`
	Aliases   []string    `json:"aliases"`
	Facts     []GraphFact `json:"facts"`
	Edges     []GraphEdge `json:"edges"`
	AsOf      *time.Time  `json:"as_of,omitempty"`
	Barrier   Barrier     `json:"barrier"`
}

// GraphFact is one observation of a fact the entity is the subject or object of.
type GraphFact struct {
	Subject     string     `json:"subject"`
	Predicate   string     `json:"predicate"`
	Object      string     `json:"object"`
	Cardinality string     `json:"cardinality"`
	ValidFrom   time.Time  `json:"valid_from"`
	ValidTo     *time.Time `json:"valid_to"`
	InvalidAt   *time.Time `json:"invalid_at"`
	SeenAt      time.Time  `json:"seen_at"`
	Restored    bool       `json:"restored"`
	Fallback    bool       `json:"fallback"`
	Open        bool       `json:"open"`
	Rows        []struct {
		MemoryID  string `json:"memory_id"`
		MemoryKey string `json:"memory_key"`
		Agent     string `json:"agent"`
		UserID    string `json:"user_id"`
		SessionID string `json:"session_id"`
		Holds     bool   `json:"holds"`
	} `json:"rows"`
}

// GraphEdge is an entity named beside another on a row.
type GraphEdge struct {
	Entity    string     `json:"entity"`
	Weight    int        `json:"weight"`
	ValidFrom time.Time  `json:"valid_from"`
	ValidTo   *time.Time `json:"valid_to"`
	Open      bool       `json:"open"`
}

// Health is what /v1/health answers: Status to anyone, the rest to the operator's token.
type Health struct {
	Status            string   `json:"status"`
	Version           string   `json:"version"`
	Roles             []string `json:"roles"`
	DeploymentID      string   `json:"deployment_id"`
	PendingMigrations []string `json:"pending_migrations"`
	ClickHouse        struct {
		Version        string `json:"version"`
		CosineDistance bool   `json:"cosine_distance"`
	} `json:"clickhouse"`
	Projection  string          `json:"projection"`
	Topic       string          `json:"topic"`
	SearchIndex string          `json:"search_index"` // memory or clickhouse (LOOM_SEARCH_INDEX)
	Index       *HealthIndex    `json:"index,omitempty"`
	Postgres    *HealthPostgres `json:"postgres,omitempty"`
	Lag         *HealthLag      `json:"lag,omitempty"`
	// Workers is each background worker's queue, with include "workers".
	Workers map[string]WorkerQueue `json:"workers,omitempty"`
	// Passes are the workers role's background passes, in a process running it; with
	// include "workers", every pass with its queue.
	Passes map[string]HealthPass `json:"passes,omitempty"`
	// With include "namespaces", "erasures", "extractions" and "topic" (health_types.go).
	Namespaces  *HealthNamespaces  `json:"namespaces,omitempty"`
	Erasures    *HealthErasures    `json:"erasures,omitempty"`
	Extractions *HealthExtractions `json:"extractions,omitempty"`
	TopicLatest *HealthTopic       `json:"topic_latest,omitempty"`
}

// WorkerQueue is one background worker's queue in /v1/health.
type WorkerQueue struct {
	Owed       int64      `json:"owed"`
	Done       int64      `json:"done"`
	Failures   int64      `json:"failures"`
	LastDoneAt *time.Time `json:"last_done_at"`
}

// HealthPass is one background pass in health's `passes`.
type HealthPass struct {
	Enabled  bool       `json:"enabled"`
	LastRun  *time.Time `json:"last_run,omitempty"`
	RowsDone int64      `json:"rows_done"`
	RowsOwed int64      `json:"rows_owed"`
	Failures int64      `json:"failures"`
	// Queue is the pass's worker queue (include "workers"), for a pass fed by one.
	Queue *WorkerQueue `json:"queue,omitempty"`
}

// HealthIndex is health's `index` object: the process's in-process search index, its
// warm-up and what it holds.
type HealthIndex struct {
	Warm           bool      `json:"warm"`
	TargetRecords  int64     `json:"target_records"`
	AppliedRecords int64     `json:"applied_records"`
	WarmPercent    float64   `json:"warm_percent"`
	RecordsBehind  int64     `json:"records_behind"`
	StartedAt      time.Time `json:"started_at"`
	WarmAt         time.Time `json:"warm_at,omitzero"`
	WarmSeconds    float64   `json:"warm_seconds,omitempty"`
	Namespaces     int       `json:"namespaces"`
	NamespacesHeld int       `json:"namespaces_held"`
	Entries        int64     `json:"entries"`
	Vectors        int64     `json:"vectors"`
	Bytes          int64     `json:"bytes"`
	BudgetBytes    int64     `json:"budget_bytes"`
	Evicted        int64     `json:"evicted_namespaces"`
	Undecodable    int64     `json:"undecodable_records"`
	Unopenable     int64     `json:"unopenable_records"`
	LastAppliedAgo float64   `json:"last_applied_seconds_ago,omitempty"`
	// The checkpoint the process started from (memories restored, the records they stood
	// for), why one found was refused, and the checkpoints written since.
	RestoredEntries    int64     `json:"restored_entries,omitempty"`
	RestoredRecords    int64     `json:"restored_records,omitempty"`
	CheckpointRefused  string    `json:"checkpoint_refused,omitempty"`
	CheckpointsWritten int64     `json:"checkpoints_written,omitempty"`
	CheckpointBytes    int64     `json:"checkpoint_bytes,omitempty"`
	CheckpointAt       time.Time `json:"checkpoint_at,omitzero"`
	CheckpointFailures int64     `json:"checkpoint_failures,omitempty"`
}

// HealthPostgres is health's `postgres` object (include=postgres); Error when it could not be read.
type HealthPostgres struct {
	Error                 string  `json:"error,omitempty"`
	Durability            string  `json:"durability,omitempty"`
	OutboxDepth           int64   `json:"outbox_depth"`
	OldestUnpublishedAgeS float64 `json:"oldest_unpublished_age_s"`
	ParkedDeliveries      int64   `json:"parked_deliveries"`
	ProjectionFailures    *struct {
		Error      string `json:"error,omitempty"`
		Failed     int64  `json:"failed"`     // records the projector could not apply
		Held       int64  `json:"held"`       // records held behind them
		Namespaces int64  `json:"namespaces"` // namespaces held, their watermarks stopped
	} `json:"projection_failures,omitempty"`
	Replication *struct {
		SynchronousStandbyNames string `json:"synchronous_standby_names"`
		SyncStandbysAttached    int    `json:"sync_standbys_attached"`
		ReplicationStatsVisible bool   `json:"replication_stats_visible"`
	} `json:"replication,omitempty"`
}

// HealthLag is health's `lag` object (include=lag); Error when it could not be read.
type HealthLag struct {
	Error            string `json:"error,omitempty"`
	NamespacesBehind int64  `json:"namespaces_behind"`
	SeqsBehind       int64  `json:"seqs_behind"`
	Behind           []struct {
		Org        string `json:"org"`
		Namespace  string `json:"namespace"`
		Generation int64  `json:"generation"`
		Watermark  int64  `json:"watermark"`
	} `json:"behind"`
}

// Ready is what /v1/health/ready answers, ready or not.
type Ready struct {
	Ready             bool     `json:"ready"`
	PendingMigrations []string `json:"pending_migrations"`
	Checks            struct {
		Postgres   string `json:"postgres"`
		ClickHouse string `json:"clickhouse"`
		Index      string `json:"index,omitempty"` // "warm", or the search index's replay so far
	} `json:"checks"`
}

// ResetRequest is a projection reset: to `earliest`, `latest` or an RFC 3339 time.
type ResetRequest struct {
	To      string `json:"to"`
	Execute bool   `json:"execute,omitempty"`
}

// ResetAnswer is the reset's plan and whether it was carried out.
type ResetAnswer struct {
	Group      string `json:"group"`
	Topic      string `json:"topic"`
	To         string `json:"to"`
	Partitions []struct {
		Partition int   `json:"partition"`
		Current   int64 `json:"current"`
		New       int64 `json:"new"`
		Target    int64 `json:"target,omitempty"` // set when the move stopped short, at the first unapplied record
	} `json:"partitions"`
	Members    []string `json:"members"`
	Executed   bool     `json:"executed"`
	PausedHere bool     `json:"paused_here"`
}

// NamespacesOptions page namespace.list.
type NamespacesOptions struct {
	Limit     int // 1..500, default 50
	PageToken string
}

// NamespacesAnswer is one page of namespace.list.
type NamespacesAnswer struct {
	Namespaces    []NamespaceSummary `json:"namespaces"`
	NextPageToken string             `json:"next_page_token,omitempty"`
}

// NamespaceSummary is one namespace of namespace.list: its name, how many live
// memories a default memory.list of the token serves there (at most 1000;
// MemoriesMore when it holds more) and, when its policy was set, a summary of it.
type NamespaceSummary struct {
	Namespace    string         `json:"namespace"`
	Memories     int            `json:"memories"`
	MemoriesMore bool           `json:"memories_more,omitempty"`
	Policy       *PolicySummary `json:"policy,omitempty"`
}

// PolicySummary is what namespace.list shows of a namespace's policy.
type PolicySummary struct {
	ConflictPolicy string    `json:"conflict_policy"`
	Visibility     string    `json:"visibility"`
	RetentionDays  int       `json:"retention_days,omitempty"`
	UpdatedAt      time.Time `json:"updated_at"`
}
