// Package command is Loom's write side: the HTTP routes that change memory, one file
// per operation, and the one Postgres transaction every revision commits through
// (commit.go). A revision is durable and on its way to the topic when the write answers.
package command

import (
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/metrics"
)

// Config is what the write side reads from loomd's configuration.
type Config struct {
	Topic             string
	EventSource       string
	CharLimit         int
	AdmissionRounds   int
	CommitLockTimeout time.Duration
	// WriteDeadline bounds a write's Postgres work, its commit's wait for the
	// synchronous standby included (statement_timeout does not cover that wait).
	WriteDeadline time.Duration
}

// Service holds the write side's dependencies.
type Service struct {
	cfg      Config
	pool     *pgxpool.Pool
	embedder embed.Embedder
	log      *slog.Logger
	now      func() time.Time
	writes   *metrics.CounterVec
	latency  *metrics.HistogramVec
}

// New returns the write side.
func New(cfg Config, pool *pgxpool.Pool, embedder embed.Embedder, reg *metrics.Registry, log *slog.Logger) *Service {
	if cfg.AdmissionRounds < 1 {
		cfg.AdmissionRounds = 1
	}
	if cfg.WriteDeadline <= 0 {
		cfg.WriteDeadline = 15 * time.Second
	}
	return &Service{
		cfg: cfg, pool: pool, embedder: embedder, log: log, now: time.Now,
		writes:  reg.Counter("loom_writes_total", "Write operations by operation and outcome.", "op", "outcome"),
		latency: reg.Histogram("loom_write_seconds", "Write latency by operation.", nil, "op"),
	}
}

// Register mounts the write routes behind authentication.
func (s *Service) Register(r fiber.Router, tokens *auth.Store) {
	g := r.Group("/v1", tokens.Middleware())
	g.Put("/namespaces/:ns/memories/:key", s.handleSet)
}
