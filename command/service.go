// Package command is Loom's write side: the HTTP routes that change memory, one file
// per operation, and the one Postgres transaction every revision commits through
// (set_6_commit.go). A revision is durable and on its way to the topic when the write answers.
package command

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"

	lru "github.com/hashicorp/golang-lru/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomplane/loom/command/extraction"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/contentkey"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/groupcommit"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/idempotency"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/metrics"
	"github.com/loomplane/loom/internal/outbox"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/searchindex"
	"github.com/loomplane/loom/internal/tracing"
	"github.com/loomplane/loom/internal/userref"
)

// settings is what the write side reads: its section of loomd's configuration and
// what every role shares (the topic its records go to, their source, the serving
// projection whose watermark an admission captures).
type settings struct {
	config.Command
	config.Pipeline
}

// Faults lets a test break the write path at a chosen point; nil fields do nothing.
type Faults struct {
	// BeforeCommit runs right before a memory.set or a copy writer commits (a slow
	// request, or one whose head changes between its read and its commit).
	BeforeCommit func()
	// AfterCommit runs once a commit returned (a memory.set, a copy writer, a blacklist
	// sweep's batch); an error stands for the commit's answer lost on the way back (the
	// connection cut right after COMMIT).
	AfterCommit func() error
	// AfterErasureStep runs once an erasure saga checkpointed a step; an error stops
	// the run there, as a crash would, leaving the saga to erasure_recovery.
	AfterErasureStep func(step string) error
}

func (f *Faults) beforeCommit() {
	if f != nil && f.BeforeCommit != nil {
		f.BeforeCommit()
	}
}

func (f *Faults) afterCommit() error {
	if f == nil || f.AfterCommit == nil {
		return nil
	}
	if err := f.AfterCommit(); err != nil {
		return httperr.Unavailable(httperr.CodePostgresDown, "the commit's answer was lost; retry with the same Idempotency-Key",
			fmt.Errorf("%w: %w", pg.ErrOutcomeUnknown, err)).With("outcome_unknown", true)
	}
	return nil
}

// Service holds the write side's dependencies.
type Service struct {
	idem            *idempotency.Store // the Idempotency-Keys of memory's writes
	extractionSteps *extraction.Steps  // register_step's; nil: none
	cfg             settings
	pool            *pgxpool.Pool
	ch              *ch.Conn
	embedder        embed.Embedder
	models          *llm.Provider // model calls: extraction; nil answers LLM_NOT_CONFIGURED
	log             *slog.Logger
	now             func() time.Time
	vectors         *lru.Cache[string, []float32]
	policies        policyCache
	// judging keeps the namespaces' calibrated thresholds (conflict_calibration.go).
	judging *judgingCalibrations
	// recent are the keys the process committed last (set_1_predict.go).
	recent *recentKeys
	// userRefs are the orgs' keys the topic names users by (events.UserRef).
	userRefs *userref.Keys
	kek      *kek.Ring // what stored data keys are wrapped under (WithKeys)
	// contentKeys are the scopes' content keys the commit hashes rows under in Go.
	contentKeys *contentkey.Cache
	faults      *Faults
	// index is the process's search index: the peer read and its capture when it holds
	// the namespace. nil: ClickHouse.
	index *searchindex.Index
	// relayWake wakes the relay after a commit, outside its transaction; nil: the
	// commit notifies in the transaction.
	relayWake *outbox.Waker
	// grouped puts the commits of one namespace that wait for each other in one
	// transaction (set_6_commit.go).
	grouped *groupcommit.Group[*commitPlan]
	writes  *metrics.CounterVec
	latency *metrics.HistogramVec
	// commits counts the commits of judged writes by outcome: committed, or sent back
	// to a new round (commitRound).
	commits *metrics.CounterVec
	// consolidation counts memory.consolidate's model calls and merged rows
	// (consolidate.go).
	consolidation *metrics.CounterVec
	// usageRecords counts the memory.usage_recorded records published (usage_publish.go).
	usageRecords *metrics.Counter

	// judgement is the cosine at which a write's peer marks it for the conflict
	// resolver (WithJudgementFloor); 0: the resolver is off.
	judgement float64
	// tracer traces the commits (loom.commit); a no-op without WithTracer.
	tracer trace.Tracer
	// tokens is the process's token store, whose cache an erasure that deletes a
	// user's name empties (WithTokens); nil: the erasure's NOTIFY alone does.
	tokens *auth.Store
}

// Option changes how New builds the write side.
type Option func(*Service)

// WithModels gives the write side its model provider (memory.set_from_messages).
func WithModels(p *llm.Provider) Option { return func(s *Service) { s.models = p } }

// WithExtractionSteps hands memory.set_from_messages the steps an operator registered
// (register_step): a request may name them in its pipeline.
func WithExtractionSteps(steps *extraction.Steps) Option {
	return func(s *Service) { s.extractionSteps = steps }
}

// ExtractionSteps are the steps an operator registered (the extraction workers run
// deferred requests' pipelines with them).
func (s *Service) ExtractionSteps() *extraction.Steps { return s.extractionSteps }

// WithFaults breaks the write path where f says (tests).
func WithFaults(f Faults) Option { return func(s *Service) { s.faults = &f } }

// WithTokens is the process's token store: an erasure that deletes a user's name
// empties its cache as it commits, so the process answers no token as the user from it.
func WithTokens(t *auth.Store) Option { return func(s *Service) { s.tokens = t } }

// WithSearchIndex reads peers from the process's search index (nil: from ClickHouse).
func WithSearchIndex(x *searchindex.Index) Option { return func(s *Service) { s.index = x } }

// WithTracer traces the write side's commits with t (nil: not traced).
func WithTracer(t trace.Tracer) Option { return func(s *Service) { s.tracer = tracing.Tracer(t) } }

// WithRelayWaker wakes the relay after each commit through w instead of a NOTIFY in
// the commit's transaction (outbox.Waker says why).
func WithRelayWaker(w *outbox.Waker) Option { return func(s *Service) { s.relayWake = w } }

// New returns the write side, configured by its section as it is.
func New(cfg config.Command, pipe config.Pipeline, pool *pgxpool.Pool, conn *ch.Conn, embedder embed.Embedder,
	reg *metrics.Registry, log *slog.Logger, opts ...Option) *Service {
	s := &Service{
		cfg: settings{Command: cfg, Pipeline: pipe}, pool: pool, ch: conn, embedder: embedder, log: log, now: time.Now,
		vectors: newVectorCache(), policies: newPolicyCache(), judging: newJudgingCalibrations(), recent: newRecentKeys(), userRefs: userref.New(pool, nil), tracer: tracing.Tracer(nil),
		writes:  reg.Counter("loom_writes_total", "Write operations by operation and outcome.", "op", "outcome"),
		latency: reg.Histogram("loom_write_seconds", "Write latency by operation.", nil, "op"),
		commits: reg.Counter("loom_admission_commits_total", "Commits of judged writes by outcome: committed, "+
			"or sent back to a new round because rows committed since the peer read may be peers (gap), "+
			"a head moved (head_moved) or the namespace's policy changed (policy_moved).", "outcome"),
		consolidation: reg.Counter("loom_consolidation_total",
			"memory.consolidate's work: model_calls, merged_rows, summaries, failed_clusters, undone_runs.", "what"),
		usageRecords: reg.Counter("loom_usage_records_total",
			"memory.usage_recorded records the command role published: one per namespace with usage counted per LOOM_USAGE_PUBLISH_INTERVAL_MS.").With(),
	}
	for _, o := range opts {
		o(s)
	}
	s.contentKeys = contentkey.New(s.kek, cfg.ContentKeyTTL) // under the KEK ring WithKeys gave
	s.grouped = newCommitGroup(s)
	s.idem = s.newIdempotency()
	return s
}

// Register mounts the write routes; the process authenticates them (cmd/loomd/app).
func (s *Service) Register(r fiber.Router) {
	g := r.Group("/v1")
	g.Put("/namespaces/:ns/memories/:key", s.handleSet)
	g.Post("/namespaces/:ns/memories/:key", s.handleKeyMethod)
	g.Delete("/namespaces/:ns/memories/:key", s.handleDelete)
	g.Patch("/namespaces/:ns/memories/:key", s.handleUpdate)
	g.Patch("/memories/:id", s.handleUpdateByID)
	g.Post("/memories/:id", s.handleIDMethod)
	g.Post("/namespaces/:ns/memories\\:sweepExpired", s.handleSweepExpired)
	g.Post("/namespaces/:ns/memories\\:clear", s.handleClear)
	g.Post("/namespaces/:ns/memories\\:bulkSet", s.handleBulkSet)
	g.Post("/namespaces/:ns/memories\\:fromMessages", s.handleFromMessages)
	g.Post("/namespaces/:ns/memories\\:import", s.handleImport)
	g.Post("/namespaces/:ns/turns", s.handleObserve)
	g.Post("/namespaces/:ns/turns\\:crystallize", s.handleCrystallize)
	g.Post("/extractions\\:retry", s.handleRetryExtractions)
	g.Get("/namespaces/:ns", s.handleGetNamespace)
	g.Put("/namespaces/:ns", s.handlePutNamespace)
	g.Post("/namespaces/:ns\\:restore", s.handleRestore)
	g.Post("/namespaces/:ns\\:rollback", s.handleRollback)
	g.Get("/namespaces/:ns/blacklist", s.handleGetNamespace)
	g.Post("/namespaces/:ns/blacklist", s.handleBlacklistAdd)
	g.Delete("/namespaces/:ns/blacklist", s.handleBlacklistRemove)
	g.Post("/namespaces/:ns/blacklist\\:sweep", s.handleBlacklistSweep)
	// The conflict allowlist (conflict_allowlist.go).
	g.Get("/namespaces/:ns/conflict-allowlist", s.handleAllowlistList)
	g.Post("/namespaces/:ns/conflict-allowlist", s.handleAllowlistAdd)
	g.Delete("/namespaces/:ns/conflict-allowlist", s.handleAllowlistRemove)
	g.Post("/erasures", s.handleErasure)
	g.Get("/erasures/:erasure_id", s.handleGetErasure)
	// Structured profiles and consolidation (profile_schema.go, consolidate.go).
	g.Put("/namespaces/:ns/profile-schema", s.handleSetProfileSchema)
	g.Post("/namespaces/:ns/memories\\:consolidate", s.handleConsolidate)
	g.Post("/namespaces/:ns/consolidations/:run_id\\:undo", s.handleConsolidationUndo)
	g.Get("/orgs/self/model-calls", s.handleGetModelCalls)
	g.Put("/orgs/self/model-calls", s.handlePutModelCalls)
	g.Post("/namespaces/:ns/decisions", s.handleDecisionRecord)
	g.Delete("/namespaces/:ns", s.handleDeleteNamespace)
	// Diagnostic reports (namespace_validate.go, namespace_tune.go).
	g.Get("/namespaces/:ns/validate", s.handleValidateNamespace)
	g.Get("/namespaces/:ns/tune", s.handleTuneNamespace)
}
