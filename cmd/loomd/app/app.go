// Package app wires one loomd process from its configuration: it connects the
// stores, runs the boot checks (internal/boot), migrates when asked, builds each role
// the configuration names (command, query, relay, projector) once from its section,
// mounts their routes behind one authentication, and runs them until its context
// ends. Any number of processes of each role run side by side; the relay elects one
// active publisher. docs/architecture.md is the map.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/command/extraction"
	"github.com/loomplane/loom/internal/atrest"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/boot"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/kafka"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/llm/spend"
	"github.com/loomplane/loom/internal/metrics"
	"github.com/loomplane/loom/internal/outbox"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/revisions"
	"github.com/loomplane/loom/internal/tableset"
	"github.com/loomplane/loom/internal/tracing"
	"github.com/loomplane/loom/internal/userref"
	"github.com/loomplane/loom/internal/watermarks"
	kcommand "github.com/loomplane/loom/knowledge/command"
	kindex "github.com/loomplane/loom/knowledge/index"
	kquery "github.com/loomplane/loom/knowledge/query"
	"github.com/loomplane/loom/projector"
	"github.com/loomplane/loom/query"
	"github.com/loomplane/loom/relay"
	"github.com/loomplane/loom/workers"
)

// Version is loomd's build version.
const Version = "0.1.0"

// Process is one loomd process: its stores, its roles and its HTTP app.
type Process struct {
	Cfg      config.Config
	Log      *slog.Logger
	PG       *pgxpool.Pool
	CH       *ch.Conn
	Metrics  *metrics.Registry
	Embedder embed.Embedder
	LLM      *llm.Provider // model calls; without LOOM_LLM_BASE_URL each answers LLM_NOT_CONFIGURED
	Tokens   *auth.Store
	HTTP     *fiber.App
	// Command is the write side, built when the process runs the command role or the
	// workers role (whose workers write through it).
	Command *command.Service
	// Workers is the workers role (the conflict resolver, the entity extractor) and
	// the extraction workers, built with the write side they write through.
	Workers *workers.Service
	// Query is the read side, built when the process runs the query role.
	Query *query.Service
	// Knowledge and KnowledgeQuery are the knowledge plane's write and read sides, built
	// with the command and the query role; KnowledgeIndex is the read side's chunk
	// index, fed by its own follower of the topic.
	Knowledge      *kcommand.Service
	KnowledgeQuery *kquery.Service
	KnowledgeIndex *kindex.Index
	// Keys are the key-encryption keys the stored data keys are wrapped under (LOOM_KEK).
	Keys *kek.Ring
	// Tracing is the process's tracer provider: OTLP when OTEL_EXPORTER_OTLP_ENDPOINT
	// names a collector, a no-op otherwise.
	Tracing *tracing.Provider

	// DeploymentID is the deployment both stores record (loom.authority, loom.storage_authority).
	DeploymentID string

	opts          options
	relay         atomic.Pointer[relay.Relay] // the relay role's, for health
	watermarkWake *pg.Listener
	wantedWake    *pg.Listener  // a barrier waiting for the projection calls the projector
	relayWake     *outbox.Waker // the command side's commits wake the relays through it
	projector     *projector.Switch
	auditChainOff atomic.Bool // SetAuditChain: `loomd bench chain`'s switch
	migrations    *boot.Migrations
	index         *searchIndex // nil: the process reads ClickHouse for search and peers
	// keyHandoff carries the data keys the relay seals records with to the index
	// follower, when the process runs both (nil otherwise).
	keyHandoff *revisions.Handoff
	closeOnce  sync.Once
}

// Option changes how Open builds a process's roles.
type Option func(*options)

type options struct {
	commandFaults   command.Faults
	relayFaults     relay.Faults
	projectorFaults projector.Faults
	modelClock      func() time.Time
	queryOptions    []query.Option
	extractionSteps *extraction.Steps
	pgTracer        pgx.QueryTracer
	tracing         *tracing.Provider
}

// WithQueryOptions builds the read side with these options (a test's planner clock).
func WithQueryOptions(opts ...query.Option) Option {
	return func(o *options) { o.queryOptions = append(o.queryOptions, opts...) }
}

// WithExtractionSteps hands the extraction the steps an operator registered
// (register_step): a build of loomd that registers its own passes them here, and a
// memory.set_from_messages request may name them.
func WithExtractionSteps(steps *extraction.Steps) Option {
	return func(o *options) { o.extractionSteps = steps }
}

// WithPGTracer hands every statement and batch the process sends Postgres to t (a
// test counting a request's round trips).
func WithPGTracer(t pgx.QueryTracer) Option { return func(o *options) { o.pgTracer = t } }

// WithTracing traces the process with p instead of the provider its configuration
// describes (the bench's recording provider, tracing.Recording).
func WithTracing(p *tracing.Provider) Option { return func(o *options) { o.tracing = p } }

// WithCommandFaults breaks the write path where f says (tests).
func WithCommandFaults(f command.Faults) Option { return func(o *options) { o.commandFaults = f } }

// WithRelayFaults stops the relay where f says (tests).
func WithRelayFaults(f relay.Faults) Option { return func(o *options) { o.relayFaults = f } }

// WithModelClock is the clock the model provider reads its day from, so its daily
// cost cap resets when now says (tests).
func WithModelClock(now func() time.Time) Option { return func(o *options) { o.modelClock = now } }

// WithProjectorFaults breaks the projection where f says (tests).
func WithProjectorFaults(f projector.Faults) Option {
	return func(o *options) { o.projectorFaults = f }
}

// Open connects the stores and runs the boot checks: LOOM_PG_DURABILITY against the
// primary's synchronous standbys, then, with LOOM_BOOT_MIGRATE, migrates both stores,
// records the deployment and creates the topic; without it, applies and records
// nothing, refuses stores that record no deployment or another one, and notes the
// pending migrations (the process then serves health only until they are applied).
// It builds the roles and starts nothing; Run does.
func Open(ctx context.Context, cfg config.Config, log *slog.Logger, opts ...Option) (*Process, error) {
	if err := cfg.RequireStores(); err != nil {
		return nil, err
	}
	// The roles' request deadlines come from the stores' settings.
	cfg.Command.PeerReadDeadline = cfg.ClickHouse.ReadDeadline
	cfg.Query.PointReadDeadline, cfg.Query.AfterBarrierDeadline = cfg.PG.ReadDeadline, cfg.ClickHouse.ReadDeadline
	p := &Process{Cfg: cfg, Log: log, Metrics: metrics.NewRegistry()}
	p.Metrics.RegisterRuntime()
	for _, o := range opts {
		o(&p.opts)
	}
	ok := false
	defer func() {
		if !ok {
			p.Close()
		}
	}()
	var err error
	if p.Tracing = p.opts.tracing; p.Tracing == nil {
		if p.Tracing, err = tracing.New(ctx, cfg.Tracing); err != nil {
			return nil, err
		}
	}
	if p.Keys, err = cfg.Keys.Ring(); err != nil {
		return nil, err
	}
	p.PG, err = pg.Open(ctx, pg.PoolConfig{DSN: cfg.PG.DSN, MinConns: cfg.PG.PoolMin, MaxConns: cfg.PG.PoolMax,
		StatementTimeout: cfg.PG.StatementTimeout, KEK: p.Keys.SessionValue(), Tracer: p.opts.pgTracer})
	if err != nil {
		return nil, err
	}
	// A new connection's dial and handshake heed no request's deadline, only the dial
	// timeout: it is kept within a request's wait for ClickHouse.
	p.CH, err = ch.Open(ctx, ch.Config{Addr: cfg.ClickHouse.Addr, Username: cfg.ClickHouse.User, Password: cfg.ClickHouse.Password,
		Cluster: cfg.ClickHouse.Cluster, ReadTimeout: cfg.ClickHouse.ReadTimeout, DialTimeout: min(5*time.Second, cfg.ClickHouse.ReadDeadline)})
	if err != nil {
		return nil, err
	}
	if err := boot.Durability(ctx, p.PG, cfg.PG.Durability, log); err != nil {
		return nil, err
	}
	p.migrations = boot.NewMigrations(p.PG, p.CH)
	if cfg.Boot.Migrate {
		if err := p.Migrate(ctx); err != nil {
			return nil, err
		}
	} else {
		if p.DeploymentID, err = boot.Authority(ctx, p.PG, p.CH, cfg.Boot.DeploymentID, false, log); err != nil {
			return nil, err
		}
		if pending := p.migrations.Pending(ctx, 0); len(pending) > 0 {
			log.Warn("LOOM_BOOT_MIGRATE=0 and migrations are pending: serving health only until they are applied", "pending_migrations", pending)
		}
	}
	if p.Embedder, err = embed.New(cfg.Embedder); err != nil {
		return nil, err
	}
	if p.LLM, err = llm.New(cfg.LLM, llm.Options{Ledger: spend.NewLedger(p.PG), Metrics: p.Metrics, Log: log, Now: p.opts.modelClock}); err != nil {
		return nil, err
	}
	p.Tokens = auth.NewStore(p.PG, auth.WithCacheTTL(cfg.HTTP.TokenCache), auth.WithLookupDeadline(cfg.PG.ReadDeadline),
		auth.WithUserRefs(userref.New(p.PG, p.Keys)), auth.WithKEK(p.Keys))
	p.watermarkWake = pg.NewListener(p.PG, watermarks.Channel, log)
	p.wantedWake = pg.NewListener(p.PG, watermarks.WantedChannel, log)
	p.projector = projector.NewSwitch()
	p.index = p.openIndex()
	if cfg.Roles.Has(config.RoleCommand) || cfg.Roles.Has(config.RoleWorkers) {
		// The workers write through the command side's commit: a workers-only process
		// builds the write side too, and serves none of its routes.
		p.relayWake = outbox.NewWaker(p.PG, log)
		p.Command = command.New(cfg.Command, cfg.Pipeline, p.PG, p.CH, p.Embedder, p.Metrics, log,
			command.WithFaults(p.opts.commandFaults), command.WithModels(p.LLM), command.WithExtractionSteps(p.opts.extractionSteps), command.WithSearchIndex(p.Index()),
			command.WithJudgementFloor(workers.JudgementFloor(cfg.Workers)), command.WithRelayWaker(p.relayWake), command.WithTracer(p.tracer()), command.WithKeys(p.Keys),
			command.WithTokens(p.Tokens))
		p.Workers = workers.New(p.Command, cfg.Workers, cfg.Pipeline, cfg.Command.Extraction, p.PG, p.Embedder, p.LLM, p.Metrics, log)
		p.Workers.UseClickHouse(p.CH)
		p.Knowledge = kcommand.New(kcommand.Config{Topic: cfg.Pipeline.Topic, EventSource: cfg.Pipeline.EventSource,
			IdempotencyLease: cfg.Command.IdempotencyLease, MaxRecordBytes: cfg.Kafka.MaxRecordBytes},
			p.PG, p.Embedder, p.Keys, p.relayWake, log)
	}
	if cfg.Roles.Has(config.RoleQuery) {
		if err := p.openQuery(); err != nil {
			return nil, err
		}
	}
	if p.HTTP, err = p.newHTTP(); err != nil {
		return nil, err
	}
	ok = true
	return p, nil
}

// openQuery builds the read side: search, its reranker and barrier, and knowledge's reads.
func (p *Process) openQuery() error {
	reranker, err := query.NewReranker(p.Cfg.Query.Retrieval, p.LLM, nil)
	if err != nil {
		return err
	}
	opts := p.opts.queryOptions
	if reranker != nil {
		opts = append([]query.Option{query.WithReranker(reranker)}, opts...)
	}
	barrier := query.NewBarrier(p.PG, p.Cfg.Pipeline.Projection, p.Cfg.Query.ProjectionWait, p.watermarkWake)
	p.KnowledgeIndex = kindex.New(kindex.Config{GraphMin: p.Cfg.SearchIndex.GraphMin})
	p.KnowledgeQuery = kquery.New(p.PG, p.KnowledgeIndex, p.Embedder, p.Cfg.Query.ProjectionWait, p.Log)
	p.KnowledgeQuery.UseModel(p.LLM)
	opts = append([]query.Option{query.WithSearchIndex(p.Index()), query.WithModel(p.LLM),
		query.WithKnowledgeSource(knowledgeLayer{p.KnowledgeQuery})}, opts...)
	// The evidence legs open the conversation's chunks with the KEK ring in Go.
	opts = append(opts, query.WithKeys(p.Keys))
	p.Query = query.New(p.Cfg.Query, p.PG, p.CH, barrier, p.Embedder, p.Metrics, p.Log, opts...)
	if p.Workers != nil {
		// The recalibration pass's rewrite reaches this process's searches at once (its
		// writes' thresholds too: KeepRecalibration drops the command side's cache).
		p.Workers.OnRecalibrated(p.Query.ForgetCalibration)
	}
	return nil
}

// Migrate applies both stores' migrations, records the deployment in each and makes
// sure the topic exists.
func (p *Process) Migrate(ctx context.Context) error {
	if err := boot.Migrate(ctx, p.PG, p.CH, p.Log); err != nil {
		return err
	}
	var err error
	if p.DeploymentID, err = boot.Authority(ctx, p.PG, p.CH, p.Cfg.Boot.DeploymentID, true, p.Log); err != nil {
		return err
	}
	p.migrations.Pending(ctx, 0)
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	k, x := p.Cfg.Kafka, p.Cfg.Command.Extraction
	if err := kafka.EnsureTopic(tctx, k.Brokers, p.Cfg.Pipeline.Topic, k.TopicPartitions, k.TopicReplication, k.MaxRecordBytes); err != nil {
		return err
	}
	p.checkRecordLimit(tctx)
	return kafka.EnsureTopicRetained(tctx, k.Brokers, x.Topic, k.TopicPartitions, k.TopicReplication, x.TopicRetention, k.MaxRecordBytes)
}

// checkRecordLimit warns when the topic (one an operator made, or made before
// LOOM_TOPIC_MAX_RECORD_BYTES) takes smaller records than Loom may produce: a knowledge
// document whose record falls between the two is committed, refused by Kafka and
// parked by the relay, and never searched.
func (p *Process) checkRecordLimit(ctx context.Context) {
	k, topic := p.Cfg.Kafka, p.Cfg.Pipeline.Topic
	takes, err := kafka.TopicMaxMessageBytes(ctx, k.Brokers, topic)
	if err != nil {
		p.Log.Warn("could not read the topic's record limit", "topic", topic, "err", err)
		return
	}
	if takes < k.MaxRecordBytes+kafka.BatchOverheadBytes {
		p.Log.Warn("the topic takes smaller records than Loom may produce: a knowledge document whose record is larger is parked, never searched; raise the topic's max.message.bytes or lower LOOM_TOPIC_MAX_RECORD_BYTES",
			"topic", topic, "max_message_bytes", takes, "LOOM_TOPIC_MAX_RECORD_BYTES", k.MaxRecordBytes)
	}
}

// Run serves HTTP on ln (health and metrics on every process, the write routes with
// the command role, the read routes with the query role) and runs the relay and the
// projector roles until ctx ends. Then it stops in order, each within
// LOOM_SHUTDOWN_GRACE_MS: the HTTP server drains its in-flight requests first (their
// commits land and their outbox rows wait for the relay), then the relay finishes its
// round and the projector its batch and its offset commit.
func (p *Process) Run(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	roleCtx, stopRoles := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRoles()
	start := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Labelled with its name, so a CPU profile (LOOM_PPROF_ADDR) splits by role.
			pprof.Do(roleCtx, pprof.Labels("role", name), func(ctx context.Context) {
				if err := fn(ctx); err != nil && roleCtx.Err() == nil {
					errs <- fmt.Errorf("%s: %w", name, err)
				}
			})
		}()
	}
	// Every process authenticates (the operator routes at least), so every one
	// follows revocations.
	start("listener "+auth.RevocationChannel, func(ctx context.Context) error { p.Tokens.FollowRevocations(ctx, p.Log); return nil })
	if p.relayWake != nil {
		start("relay waker", func(ctx context.Context) error { p.relayWake.Run(ctx); return nil })
	}
	if p.Cfg.Roles.Has(config.RoleQuery) {
		start("listener "+watermarks.Channel, func(ctx context.Context) error { p.watermarkWake.Run(ctx); return nil })
	}
	if p.Cfg.Roles.Has(config.RoleProjector) {
		start("listener "+watermarks.WantedChannel, func(ctx context.Context) error { p.wantedWake.Run(ctx); return nil })
	}
	for _, w := range p.background() {
		start(w.name, func(ctx context.Context) error {
			if err := p.migrations.Wait(ctx, w.name, p.Log); err != nil {
				return err
			}
			return w.run(ctx)
		})
	}
	serveErr := make(chan error, 1)
	var conns *unusedConns
	if ln != nil {
		conns = newUnusedConns(ln)
		go func() {
			pprof.Do(ctx, pprof.Labels("role", "http"), func(context.Context) { serveErr <- p.HTTP.Listener(conns) })
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
	case err = <-errs:
	}
	if ln != nil {
		if serr := p.shutdownHTTP(conns); serr != nil {
			p.Log.Warn("HTTP requests still in flight at the end of the shutdown grace", "err", serr)
		}
	}
	stopRoles()
	wg.Wait()
	return err
}

// shutdownHTTP stops the HTTP server within LOOM_SHUTDOWN_GRACE_MS: no new connection,
// the requests in flight drained. A connection that never sent a request is closed, the
// shutdown's own passes closing the idle ones; until the listener is closed one may
// still arrive, so they are closed every 100 ms until the shutdown returns.
func (p *Process) shutdownHTTP(conns *unusedConns) error {
	ctx, cancel := context.WithTimeout(context.Background(), p.Cfg.Pipeline.ShutdownGrace)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.HTTP.ShutdownWithContext(ctx) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		conns.closeUnused()
		select {
		case err := <-done:
			return err
		case <-tick.C:
		}
	}
}

// work is a background loop of the process's roles, started once migrations are in.
type work struct {
	name string
	run  func(context.Context) error
}

// background lists the loops this process's roles run: the search index's follower,
// the command role's sweeps and erasure recovery (each every its interval, when it is
// positive), the relay, the projector.
func (p *Process) background() []work {
	var out []work
	if p.index != nil {
		out = append(out, work{"search index", p.runIndex})
	}
	if p.KnowledgeIndex != nil {
		follower := kindex.NewFollower(p.Cfg.Kafka.Brokers, p.Cfg.Pipeline.Topic, p.PG, p.KnowledgeIndex, p.Log)
		out = append(out, work{"knowledge index", follower.Run})
	}
	if c := p.Command; c != nil && p.Cfg.Roles.Has(config.RoleCommand) {
		if every := p.Cfg.Command.SweepInterval; every > 0 {
			out = append(out, work{"sweeps", func(ctx context.Context) error { c.RunSweeps(ctx, every); return nil }})
		}
		// A KEK rotation replaces the user reference keys under the old KEK, and
		// republishes their orgs' records under the new ones.
		rotate := &atrest.RefRotationOptions{Wait: atrest.RetiredKeyWait(p.Cfg.Command.AdmissionDeadline),
			Republish: func(ctx context.Context, org string) error {
				_, err := c.Republish(ctx, command.RepublishOptions{Org: org, FromSeq: 1, Topic: p.Cfg.Pipeline.Topic})
				return err
			}}
		out = append(out, work{"at_rest", func(ctx context.Context) error { return atrest.Run(ctx, p.PG, p.Keys, p.Log, rotate) }})
		if every := p.Cfg.Command.UsagePublishInterval; every > 0 {
			out = append(out, work{"usage_publish", func(ctx context.Context) error { c.RunUsagePublish(ctx, every); return nil }})
		}
		if every := p.Cfg.Command.Erasure.RecoveryInterval; every > 0 {
			out = append(out, work{"erasure_recovery", func(ctx context.Context) error { c.RunErasureRecovery(ctx, every); return nil }})
		}
		switch {
		case !p.Cfg.Command.Extraction.QueueEnabled:
		case !p.LLM.Configured():
			p.Log.Info("extraction_queue: no model provider is configured; deferred extractions stay pending (set LOOM_LLM_BASE_URL and LOOM_LLM_MODEL)")
		default:
			out = append(out, work{"extraction_queue", p.RunExtractionWorker})
		}
	}
	if p.Cfg.Roles.Has(config.RoleRelay) {
		out = append(out, work{string(config.RoleRelay), p.RunRelay})
	}
	if p.Cfg.Roles.Has(config.RoleProjector) {
		out = append(out, work{string(config.RoleProjector), p.RunProjector})
	}
	if p.Cfg.Roles.Has(config.RoleWorkers) {
		for _, w := range workers.Names() {
			if !p.Workers.Enabled(w) {
				p.Log.Info("worker off: its switch is off, or it calls a model and no provider (LOOM_LLM_BASE_URL) is set; the rows it owes wait", "worker", w)
				continue
			}
			if workers.Fed(w) {
				out = append(out, work{"worker feed " + w, func(ctx context.Context) error { return p.RunWorkerFeed(ctx, w) }})
			}
			out = append(out, work{"worker " + w, func(ctx context.Context) error { p.Workers.Run(ctx, w); return nil }})
		}
		if p.Knowledge != nil {
			// knowledge.ingest's jobs, run through the knowledge plane's write side.
			out = append(out, work{"worker knowledge_ingest", workers.NewIngester(p.Knowledge, p.Log).Run})
		}
		if a := p.Cfg.Workers.Audit; a.Interval > 0 {
			out = append(out, work{"audit_checkpoints", func(ctx context.Context) error {
				workers.RunAuditCheckpoints(ctx, p.CH, p.PG, a, p.Metrics, p.Log)
				return nil
			}})
		}
	}
	return out
}

// RunWorkerFeed runs a worker's consumer group until ctx ends: it queues the
// revisions the worker owes something (workers.Service.RunFeed).
func (p *Process) RunWorkerFeed(ctx context.Context, worker string) error {
	return kafka.RunMember(p.Cfg.Kafka.Brokers, workers.ConsumerOpts(worker, p.Cfg.Pipeline.Topic), func(c *kgo.Client) error {
		return p.Workers.RunFeed(ctx, worker, c)
	})
}

// RunExtractionWorker runs this process's extraction worker, a member of the
// extraction workers' consumer group, until ctx ends. It is the command role's: it
// writes through the write side's admission and commit, as the requests' tokens.
func (p *Process) RunExtractionWorker(ctx context.Context) error {
	return kafka.RunMember(p.Cfg.Kafka.Brokers, p.Workers.ExtractionConsumerOpts(), func(c *kgo.Client) error {
		return p.Workers.RunExtractionWorker(ctx, c)
	})
}

// RunRelay runs the relay role until ctx ends.
func (p *Process) RunRelay(ctx context.Context) error {
	producer, err := kafka.NewClient(p.Cfg.Kafka.Brokers, relay.ProducerOpts(p.Cfg.Kafka.MaxRecordBytes)...)
	if err != nil {
		return err
	}
	defer producer.Close()
	wake := pg.NewListener(p.PG, outbox.Channel, p.Log)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	go wake.Run(lctx)
	rcfg := p.Cfg.Relay
	rcfg.WaitForStandbys = p.Cfg.PG.Durability == config.DurabilitySynchronous
	r := relay.New(rcfg, p.Cfg.Pipeline, p.PG, producer, wake, p.Metrics, p.Log, p.opts.relayFaults)
	r.SetTracer(p.tracer())
	r.SetKeys(p.Keys)
	r.SetHandoff(p.keyHandoff)
	p.relay.Store(r)
	if p.relayWake != nil {
		defer p.relayWake.WakeLocal(func() bool { wake.Wake(); return r.Holding() })()
	}
	return r.Run(ctx)
}

// RunProjector runs the projector role for the configured projection, writing the
// serving tables, until ctx ends, standing aside while an admin request holds it
// paused, and its repair pass every LOOM_PROJECTOR_REPAIR_INTERVAL_MS.
func (p *Process) RunProjector(ctx context.Context) error {
	pr := projector.New(p.Cfg.Projector, p.Cfg.Pipeline, tableset.Serving(), p.PG, p.CH, p.Metrics, p.Log, p.opts.projectorFaults)
	pr.SetTracer(p.tracer())
	pr.SetAuditChainOff(p.auditChainOff.Load)
	pr.SetWanted(p.wantedWake.C)
	return p.projector.Run(ctx, pr, p.Cfg.Kafka.Brokers)
}

// SetAuditChain turns the linking of the audit rows this process's projector writes on
// or off (on by default): `loomd bench chain` measures memory.set with the chain on
// and off in one run. Rows written while off carry empty hashes and break a verify.
func (p *Process) SetAuditChain(on bool) { p.auditChainOff.Store(!on) }

// pauseProjector stops this process's projector when it runs projection name, and
// returns the function that starts it again (a no-op when nothing was paused).
func (p *Process) pauseProjector(ctx context.Context, name string) (resume func(), paused bool, err error) {
	if !p.Cfg.Roles.Has(config.RoleProjector) || p.Cfg.Pipeline.Projection != name {
		return func() {}, false, nil
	}
	return p.projector.Pause(ctx)
}

// tracer is the tracer every role of the process traces with.
func (p *Process) tracer() trace.Tracer { return p.Tracing.Tracer("github.com/loomplane/loom") }

// Close flushes the spans and the searches' gathered recalls, stops the indexes' graph
// builds and releases the stores. Calls after the first do nothing.
func (p *Process) Close() { p.closeOnce.Do(p.close) }

func (p *Process) close() {
	if p.Tracing != nil {
		// The spans still buffered go out before the process ends.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := p.Tracing.Shutdown(ctx); err != nil {
			p.Log.Warn("cannot export the last spans", "err", err)
		}
		cancel()
	}
	if p.index != nil {
		p.index.index.Close()
	}
	if p.Query != nil {
		p.Query.FlushRecalls()
	}
	if p.KnowledgeIndex != nil {
		p.KnowledgeIndex.Close()
	}
	if p.CH != nil {
		p.CH.Close()
	}
	if p.PG != nil {
		p.PG.Close()
	}
}
