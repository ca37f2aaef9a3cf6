// Package node assembles one loomd process from its configuration: it connects the
// stores, migrates them when asked, and runs the roles the configuration names (api,
// relay, projector) until its context ends.
package node

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/command/relay"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/kafka"
	"github.com/loomplane/loom/internal/metrics"
	"github.com/loomplane/loom/internal/pg"
	pgmigrations "github.com/loomplane/loom/pg_migrations"
	"github.com/loomplane/loom/query"
	chmigrations "github.com/loomplane/loom/schemas/clickhouse"
)

// Version is loomd's build version.
const Version = "0.1.0"

// Node is one process's stores, roles and HTTP app.
type Node struct {
	Cfg      config.Config
	Log      *slog.Logger
	PG       *pgxpool.Pool
	CH       *ch.Conn
	Metrics  *metrics.Registry
	Embedder embed.Embedder
	Tokens   *auth.Store
	App      *fiber.App
	// Command is the write side (tests install faults through it).
	Command *command.Service

	// RelayFaults is handed to the relay role (tests inject failures through it).
	RelayFaults relay.Faults

	watermarkWake *pg.Listener
	projector     *projectorSwitch
}

// Open connects the stores and, with LOOM_BOOT_MIGRATE, migrates them and creates the
// topic. It starts nothing; Run does.
func Open(ctx context.Context, cfg config.Config, log *slog.Logger) (*Node, error) {
	if err := cfg.RequireStores(); err != nil {
		return nil, err
	}
	n := &Node{Cfg: cfg, Log: log, Metrics: metrics.NewRegistry()}
	ok := false
	defer func() {
		if !ok {
			n.Close()
		}
	}()
	var err error
	n.PG, err = pg.Open(ctx, pg.PoolConfig{DSN: cfg.PGDSN, MinConns: cfg.PGPoolMin, MaxConns: cfg.PGPoolMax, StatementTimeout: cfg.PGStatementTimeout})
	if err != nil {
		return nil, err
	}
	n.CH, err = ch.Open(ctx, ch.Config{Addr: cfg.CHAddr, Username: cfg.CHUser, Password: cfg.CHPassword})
	if err != nil {
		return nil, err
	}
	if cfg.BootMigrate {
		if err := n.Migrate(ctx); err != nil {
			return nil, err
		}
	}
	n.Embedder, err = embed.New(embed.Config{Kind: cfg.Embedder, HashDim: cfg.EmbedderDim, OpenAI: embed.OpenAIConfig{
		BaseURL: cfg.OpenAIBaseURL, APIKey: cfg.OpenAIAPIKey, Model: cfg.OpenAIModel, Dim: cfg.EmbedderDim}})
	if err != nil {
		return nil, err
	}
	n.Tokens = auth.NewStore(n.PG)
	n.watermarkWake = pg.NewListener(n.PG, "loom_watermark", log)
	n.projector = newProjectorSwitch()
	n.App = n.newApp()
	ok = true
	return n, nil
}

// Migrate applies both stores' migrations and makes sure the topic exists.
func (n *Node) Migrate(ctx context.Context) error {
	if _, err := pg.Migrate(ctx, n.PG, pgmigrations.Files, n.Log); err != nil {
		return fmt.Errorf("migrate Postgres: %w", err)
	}
	if err := recordAuthority(ctx, n.PG); err != nil {
		return err
	}
	lock := func(ctx context.Context) (func(), error) { return pg.SessionLock(ctx, n.PG, pg.LockCHMigrations) }
	if _, err := ch.Migrate(ctx, n.CH, chmigrations.Files, lock, n.Log); err != nil {
		return fmt.Errorf("migrate ClickHouse: %w", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := kafka.EnsureTopic(tctx, n.Cfg.KafkaBrokers, n.Cfg.Topic, n.Cfg.TopicPartitions, n.Cfg.TopicReplication); err != nil {
		return err
	}
	return nil
}

// recordAuthority records, once, that this database is a Postgres authority and
// which deployment it serves.
func recordAuthority(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, `INSERT INTO loom.authority (deployment_id) VALUES (gen_random_uuid()::text) ON CONFLICT DO NOTHING`)
	if err != nil {
		return fmt.Errorf("record the authority: %w", err)
	}
	return nil
}

func (n *Node) newApp() *fiber.App {
	app := fiber.New(fiber.Config{
		AppName:               "loomd",
		DisableStartupMessage: true,
		ErrorHandler:          httperr.Handler(n.Log),
		BodyLimit:             n.Cfg.RequestBodyLimitBytes,
		ReadTimeout:           30 * time.Second,
		WriteTimeout:          30 * time.Second,
		IdleTimeout:           2 * time.Minute,
	})
	n.registerHealth(app)
	n.registerAdmin(app)
	cmd := command.New(command.Config{
		Topic: n.Cfg.Topic, EventSource: n.Cfg.EventSource, Projection: n.Cfg.Projection, CharLimit: n.Cfg.MemoryCharLimit,
		AdmissionRounds: n.Cfg.PGAdmissionRounds, AdmissionDeadline: n.Cfg.PGAdmissionDeadline, AdmissionGapMax: n.Cfg.PGAdmissionGapMax,
		CommitLockTimeout: n.Cfg.PGCommitLockTimeout, ConflictThreshold: n.Cfg.ConflictThreshold,
		DuplicateThreshold: n.Cfg.DuplicateThreshold, SensitiveRetention: n.Cfg.SensitiveRetention, PeerLimit: n.Cfg.PeerLimit,
		IdempotencyLease: n.Cfg.IdempotencyLease, BulkConflictCheckMax: n.Cfg.BulkConflictCheckMax,
	}, n.PG, n.CH, n.Embedder, n.Metrics, n.Log)
	cmd.Register(app, n.Tokens)
	n.Command = cmd
	barrier := query.NewBarrier(n.PG, n.Cfg.Projection, n.Cfg.PGProjectionWait, n.watermarkWake)
	q := query.New(query.Config{
		Projection: n.Cfg.Projection, ProjectionWait: n.Cfg.PGProjectionWait,
		TopKDefault: n.Cfg.SearchTopKDefault, TopKMax: n.Cfg.SearchTopKMax, MinScore: n.Cfg.SearchMinScore,
		PriorCap: n.Cfg.PriorCap, BM25K1: n.Cfg.BM25K1, BM25B: n.Cfg.BM25B,
		EmbedCacheSize: n.Cfg.EmbedCacheSize, EmbedCacheTTL: n.Cfg.EmbedCacheTTL,
	}, n.PG, n.CH, barrier, n.Embedder, n.Metrics, n.Log)
	q.Register(app, n.Tokens)
	app.Use(func(c *fiber.Ctx) error { return fiber.ErrNotFound })
	return app
}

// Run serves the configured roles until ctx ends, then stops them in order: the
// HTTP server drains first, then the relay and projector finish their batch.
func (n *Node) Run(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	roleCtx, stopRoles := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRoles()
	start := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(roleCtx); err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	start("listener loom_watermark", func(ctx context.Context) error { n.watermarkWake.Run(ctx); return nil })
	if n.Cfg.HasRole("api") && n.Cfg.SweepInterval > 0 {
		start("sweeps", func(ctx context.Context) error { n.Command.RunSweeps(ctx, n.Cfg.SweepInterval); return nil })
	}
	if n.Cfg.HasRole("relay") {
		start("relay", n.RunRelay)
	}
	if n.Cfg.HasRole("projector") {
		start("projector", n.RunProjector)
	}
	serveErr := make(chan error, 1)
	if n.Cfg.HasRole("api") {
		go func() { serveErr <- n.App.Listener(ln) }()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
	case err = <-errs:
	}
	if n.Cfg.HasRole("api") {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		n.App.ShutdownWithContext(sctx)
		cancel()
	}
	stopRoles()
	wg.Wait()
	return err
}

// RunRelay runs the relay role until ctx ends.
func (n *Node) RunRelay(ctx context.Context) error {
	producer, err := kafka.NewClient(n.Cfg.KafkaBrokers, relay.ProducerOpts()...)
	if err != nil {
		return err
	}
	defer producer.Close()
	wake := pg.NewListener(n.PG, "loom_outbox", n.Log)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	go wake.Run(lctx)
	r := relay.New(relay.Config{BatchRows: n.Cfg.OutboxBatch, Poll: n.Cfg.OutboxPoll,
		MaxAttempts: n.Cfg.OutboxMaxAttempts, EventSource: n.Cfg.EventSource}, n.PG, producer, wake, n.Metrics, n.Log, n.RelayFaults)
	return r.Run(ctx)
}

// Close releases the stores.
func (n *Node) Close() {
	if n.CH != nil {
		n.CH.Close()
	}
	if n.PG != nil {
		n.PG.Close()
	}
}
