// Package command is Loom's write side: the HTTP routes that change memory, one file
// per operation, and the one Postgres transaction every revision commits through
// (commit.go). A revision is durable and on its way to the topic when the write answers.
package command

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/metrics"
	"github.com/loomplane/loom/internal/pg"
)

// Config is what the write side reads from loomd's configuration.
type Config struct {
	Topic              string
	EventSource        string
	Projection         string // the serving projection, whose watermark an admission captures
	CharLimit          int
	AdmissionRounds    int
	AdmissionDeadline  time.Duration
	AdmissionGapMax    int // revisions a commit examines before it answers PROJECTION_BEHIND
	CommitLockTimeout  time.Duration
	ConflictThreshold  float64
	DuplicateThreshold float64
	SensitiveRetention time.Duration
	PeerLimit          int
	IdempotencyLease   time.Duration
	// BulkConflictCheckMax is how many embedded entries of a bulk_set are judged
	// against the namespace's peers; every entry is judged against the batch.
	BulkConflictCheckMax int
	// WriteDeadline bounds a write's Postgres work, its commit's wait for the
	// synchronous standby included (statement_timeout does not cover that wait).
	WriteDeadline time.Duration
	Erasure       ErasureConfig
}

// Faults lets a test break the write path at a chosen point; nil fields do nothing.
type Faults struct {
	// BeforeCommit runs right before a memory.set or a copy writer commits (a slow
	// request, or one whose head changes between its read and its commit).
	BeforeCommit func()
	// AfterCommit runs once a commit returned; an error stands for the commit's answer
	// lost on the way back (the connection cut right after COMMIT).
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
	cfg      Config
	pool     *pgxpool.Pool
	ch       *ch.Conn
	embedder embed.Embedder
	log      *slog.Logger
	now      func() time.Time
	vectors  *lru.Cache[string, []float32]
	faults   *Faults
	writes   *metrics.CounterVec
	latency  *metrics.HistogramVec
}

// New returns the write side.
func New(cfg Config, pool *pgxpool.Pool, conn *ch.Conn, embedder embed.Embedder, reg *metrics.Registry, log *slog.Logger) *Service {
	if cfg.AdmissionRounds < 1 {
		cfg.AdmissionRounds = 1
	}
	if cfg.AdmissionGapMax < 1 {
		cfg.AdmissionGapMax = 500
	}
	if cfg.BulkConflictCheckMax <= 0 {
		cfg.BulkConflictCheckMax = 100
	}
	if cfg.IdempotencyLease <= 0 {
		cfg.IdempotencyLease = time.Minute
	}
	if cfg.WriteDeadline <= 0 {
		cfg.WriteDeadline = 15 * time.Second
	}
	if cfg.PeerLimit < 1 {
		cfg.PeerLimit = 16
	}
	cfg.Erasure = cfg.Erasure.withDefaults()
	return &Service{
		cfg: cfg, pool: pool, ch: conn, embedder: embedder, log: log, now: time.Now, vectors: newVectorCache(),
		writes:  reg.Counter("loom_writes_total", "Write operations by operation and outcome.", "op", "outcome"),
		latency: reg.Histogram("loom_write_seconds", "Write latency by operation.", nil, "op"),
	}
}

// SetFaults installs test faults; call it before serving.
func (s *Service) SetFaults(f Faults) { s.faults = &f }

// Register mounts the write routes behind authentication.
func (s *Service) Register(r fiber.Router, tokens *auth.Store) {
	g := r.Group("/v1", tokens.Middleware())
	g.Put("/namespaces/:ns/memories/:key", s.handleSet)
	g.Post("/namespaces/:ns/memories/:key", s.handleKeyMethod)
	g.Delete("/namespaces/:ns/memories/:key", s.handleDelete)
	g.Patch("/namespaces/:ns/memories/:key", s.handleUpdate)
	g.Patch("/memories/:id", s.handleUpdateByID)
	g.Post("/namespaces/:ns/memories\\:sweepExpired", s.handleSweepExpired)
	g.Post("/namespaces/:ns/memories\\:clear", s.handleClear)
	g.Post("/namespaces/:ns/memories\\:bulkSet", s.handleBulkSet)
	g.Get("/namespaces/:ns", s.handleGetNamespace)
	g.Put("/namespaces/:ns", s.handlePutNamespace)
	g.Get("/namespaces/:ns/blacklist", s.handleGetNamespace)
	g.Post("/namespaces/:ns/blacklist", s.handleBlacklistAdd)
	g.Delete("/namespaces/:ns/blacklist", s.handleBlacklistRemove)
	g.Post("/erasures", s.handleErasure)
	g.Get("/erasures/:erasure_id", s.handleGetErasure)
}
