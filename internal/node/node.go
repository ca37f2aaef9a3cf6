// Package node assembles one loomd process from its configuration: it connects the
// stores, runs the boot checks (durability, the recorded deployment, migrations),
// migrates when asked, and runs the roles the configuration names (command, query,
// relay, projector) until its context ends. Any number of processes of each role run
// side by side; the relay elects one active publisher.
package node

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
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
	"github.com/loomplane/loom/mcp"
	"github.com/loomplane/loom/mem0"
	pgmigrations "github.com/loomplane/loom/pg_migrations"
	"github.com/loomplane/loom/projector"
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

	// DeploymentID is the deployment both stores record (loom.authority, loom.storage_authority).
	DeploymentID string

	// RelayFaults is handed to the relay role (tests inject failures through it).
	RelayFaults relay.Faults
	// ProjectorFaults is handed to the projector role (tests inject failures through it).
	ProjectorFaults projector.Faults

	watermarkWake *pg.Listener
	projector     *projectorSwitch
	migrations    migrationState
}

// Open connects the stores and runs the boot checks: LOOM_PG_DURABILITY against the
// primary's synchronous standbys, then, with LOOM_BOOT_MIGRATE, migrates both stores,
// records the deployment and creates the topic; without it, applies and records
// nothing, refuses stores that record no deployment or another one, and notes the
// pending migrations (the process then serves health only until they are applied).
// It starts nothing; Run does.
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
	n.CH, err = ch.Open(ctx, ch.Config{Addr: cfg.CHAddr, Username: cfg.CHUser, Password: cfg.CHPassword, Cluster: cfg.CHCluster,
		ReadTimeout: cfg.CHReadTimeout})
	if err != nil {
		return nil, err
	}
	if err := n.checkDurability(ctx); err != nil {
		return nil, err
	}
	if cfg.BootMigrate {
		if err := n.Migrate(ctx); err != nil {
			return nil, err
		}
	} else {
		if n.DeploymentID, err = n.checkAuthority(ctx, false); err != nil {
			return nil, err
		}
		if pending := n.refreshMigrations(ctx, 0); len(pending) > 0 {
			n.Log.Warn("LOOM_BOOT_MIGRATE=0 and migrations are pending: serving health only until they are applied", "pending_migrations", pending)
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

// Migrate applies both stores' migrations, records the deployment in each and makes
// sure the topic exists.
func (n *Node) Migrate(ctx context.Context) error {
	if _, err := pg.Migrate(ctx, n.PG, pgmigrations.Files, n.Log); err != nil {
		return fmt.Errorf("migrate Postgres: %w", err)
	}
	lock := func(ctx context.Context) (func(), error) { return pg.SessionLock(ctx, n.PG, pg.LockCHMigrations) }
	if _, err := ch.Migrate(ctx, n.CH, chmigrations.Files, lock, n.Log); err != nil {
		return fmt.Errorf("migrate ClickHouse: %w", err)
	}
	var err error
	if n.DeploymentID, err = n.checkAuthority(ctx, true); err != nil {
		return err
	}
	n.refreshMigrations(ctx, 0)
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := kafka.EnsureTopic(tctx, n.Cfg.KafkaBrokers, n.Cfg.Topic, n.Cfg.TopicPartitions, n.Cfg.TopicReplication); err != nil {
		return err
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
	// Health and metrics come first and end their chain, so the migration gate below
	// never holds them back: every process answers them, whatever its roles.
	n.registerHealth(app)
	n.registerAdmin(app)
	data := app.Group("", n.refuseUntilMigrated)
	if n.Cfg.HasRole(config.RoleCommand) {
		cmd := command.New(command.Config{
			Topic: n.Cfg.Topic, EventSource: n.Cfg.EventSource, Projection: n.Cfg.Projection, CharLimit: n.Cfg.MemoryCharLimit,
			AdmissionRounds: n.Cfg.PGAdmissionRounds, AdmissionDeadline: n.Cfg.PGAdmissionDeadline, AdmissionGapMax: n.Cfg.PGAdmissionGapMax,
			CommitLockTimeout: n.Cfg.PGCommitLockTimeout, ConflictThreshold: n.Cfg.ConflictThreshold,
			DuplicateThreshold: n.Cfg.DuplicateThreshold, SensitiveRetention: n.Cfg.SensitiveRetention, PeerLimit: n.Cfg.PeerLimit,
			IdempotencyLease: n.Cfg.IdempotencyLease, BulkConflictCheckMax: n.Cfg.BulkConflictCheckMax,
			WriteDeadline: n.Cfg.PGWriteDeadline,
			Erasure: command.ErasureConfig{Evidence: n.Cfg.ErasureEvidence, LedgerKeep: n.Cfg.ErasureLedgerKeep,
				Lease: n.Cfg.ErasureLease, MaxAttempts: n.Cfg.ErasureMaxAttempts, StepTimeout: n.Cfg.ErasureStepTimeout,
				RequestWait: n.Cfg.ErasureRequestWait},
		}, n.PG, n.CH, n.Embedder, n.Metrics, n.Log)
		cmd.Register(data, n.Tokens)
		n.Command = cmd
	}
	if n.Cfg.HasRole(config.RoleQuery) {
		barrier := query.NewBarrier(n.PG, n.Cfg.Projection, n.Cfg.PGProjectionWait, n.watermarkWake)
		q := query.New(query.Config{
			Projection: n.Cfg.Projection, ProjectionWait: n.Cfg.PGProjectionWait,
			TopKDefault: n.Cfg.SearchTopKDefault, TopKMax: n.Cfg.SearchTopKMax, MinScore: n.Cfg.SearchMinScore,
			PriorCap: n.Cfg.PriorCap, BM25K1: n.Cfg.BM25K1, BM25B: n.Cfg.BM25B,
			Weights:        query.Weights{Vector: n.Cfg.WeightVector, Lexical: n.Cfg.WeightLexical, Key: n.Cfg.WeightKey, Graph: n.Cfg.WeightGraph},
			EmbedCacheSize: n.Cfg.EmbedCacheSize, EmbedCacheTTL: n.Cfg.EmbedCacheTTL,
		}, n.PG, n.CH, barrier, n.Embedder, n.Metrics, n.Log)
		q.Register(data, n.Tokens)
	}
	app.Use("/mcp", n.Tokens.Middleware(), adaptor.HTTPHandler(mcp.NewHTTPHandler(mcp.HTTPOptions{Implementation: mcp.Implementation{Name: "loomd", Version: Version}, Upstream: n.Cfg.AdapterUpstreamURL})))
	app.Use("/mem0", adaptor.HTTPHandler(http.StripPrefix("/mem0", mem0.NewHandler(mem0.Options{Upstream: n.Cfg.AdapterUpstreamURL, Namespace: n.Cfg.Mem0Namespace, Infer: n.Cfg.Mem0Infer}))))
	app.Use(func(c *fiber.Ctx) error { return fiber.ErrNotFound })
	return app
}

// Run serves HTTP on ln (health and metrics on every process, the write routes with
// the command role, the read routes with the query role) and runs the relay and the
// projector roles until ctx ends. Then it stops in order, each within
// LOOM_SHUTDOWN_GRACE_MS: the HTTP server drains its in-flight requests first (their
// commits land and their outbox rows wait for the relay), then the relay finishes its
// round and the projector its batch and its offset commit.
func (n *Node) Run(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	roleCtx, stopRoles := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRoles()
	start := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(roleCtx); err != nil && roleCtx.Err() == nil {
				errs <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	if n.Cfg.HasRole(config.RoleQuery) {
		start("listener loom_watermark", func(ctx context.Context) error { n.watermarkWake.Run(ctx); return nil })
	}
	// The command role's background work, each every interval once migrations are in.
	for _, w := range []struct {
		name     string
		interval time.Duration
		run      func(context.Context, time.Duration)
	}{{"sweeps", n.Cfg.SweepInterval, n.runSweeps}, {"erasure_recovery", n.Cfg.ErasureRecovery, n.runErasureRecovery}} {
		if n.Command != nil && w.interval > 0 {
			start(w.name, func(ctx context.Context) error {
				if err := n.waitMigrated(ctx, w.name); err != nil {
					return err
				}
				w.run(ctx, w.interval)
				return nil
			})
		}
	}
	for _, role := range []struct {
		name string
		run  func(context.Context) error
	}{{config.RoleRelay, n.RunRelay}, {config.RoleProjector, n.RunProjector}} {
		if n.Cfg.HasRole(role.name) {
			start(role.name, func(ctx context.Context) error {
				if err := n.waitMigrated(ctx, role.name); err != nil {
					return err
				}
				return role.run(ctx)
			})
		}
	}
	serveErr := make(chan error, 1)
	if ln != nil {
		go func() { serveErr <- n.App.Listener(ln) }()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
	case err = <-errs:
	}
	if ln != nil {
		sctx, cancel := context.WithTimeout(context.Background(), n.Cfg.ShutdownGrace)
		if serr := n.App.ShutdownWithContext(sctx); serr != nil {
			n.Log.Warn("HTTP requests still in flight at the end of the shutdown grace", "err", serr)
		}
		cancel()
	}
	stopRoles()
	wg.Wait()
	return err
}

func (n *Node) runSweeps(ctx context.Context, every time.Duration) { n.Command.RunSweeps(ctx, every) }

func (n *Node) runErasureRecovery(ctx context.Context, every time.Duration) {
	n.Command.RunErasureRecovery(ctx, every)
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
	r := relay.New(relay.Config{BatchRows: n.Cfg.OutboxBatch, Poll: n.Cfg.OutboxPoll, MaxAttempts: n.Cfg.OutboxMaxAttempts,
		EventSource: n.Cfg.EventSource, Grace: n.Cfg.ShutdownGrace}, n.PG, producer, wake, n.Metrics, n.Log, n.RelayFaults)
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
