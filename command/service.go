// Package command is Loom's write side: the HTTP routes that change memory, one file
// per operation, and the one Postgres transaction every revision commits through
// (commit.go). A revision is durable and on its way to the topic when the write answers.
package command

import (
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/metrics"
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
	if cfg.PeerLimit < 1 {
		cfg.PeerLimit = 16
	}
	return &Service{
		cfg: cfg, pool: pool, ch: conn, embedder: embedder, log: log, now: time.Now, vectors: newVectorCache(),
		writes:  reg.Counter("loom_writes_total", "Write operations by operation and outcome.", "op", "outcome"),
		latency: reg.Histogram("loom_write_seconds", "Write latency by operation.", nil, "op"),
	}
}

// Register mounts the write routes behind authentication.
func (s *Service) Register(r fiber.Router, tokens *auth.Store) {
	g := r.Group("/v1", tokens.Middleware())
	g.Put("/namespaces/:ns/memories/:key", s.handleSet)
	g.Post("/namespaces/:ns/memories/:key", s.handleKeyMethod)
	g.Get("/namespaces/:ns", s.handleGetNamespace)
	g.Put("/namespaces/:ns", s.handlePutNamespace)
	g.Get("/namespaces/:ns/blacklist", s.handleGetNamespace)
	g.Post("/namespaces/:ns/blacklist", s.handleBlacklistAdd)
	g.Delete("/namespaces/:ns/blacklist", s.handleBlacklistRemove)
}
