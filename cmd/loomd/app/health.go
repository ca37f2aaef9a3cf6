package app

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/extractqueue"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/metrics"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/searchindex"
	"github.com/loomplane/loom/internal/watermarks"
	"github.com/loomplane/loom/projector"
	"github.com/loomplane/loom/relay"
	"github.com/loomplane/loom/workers"
)

func (p *Process) registerHealth(app *fiber.App) {
	app.Get("/v1/health", p.handleHealth)
	app.Get("/v1/health/ready", p.handleReady)
	app.Get("/metrics", p.handleMetrics)
	relay.RegisterBacklogGauges(p.Metrics, p.PG)
	projector.RegisterHealthGauges(p.Metrics, p.PG, p.Cfg.Pipeline.Projection)
}

// handleHealth is liveness: it answers while the process runs, whatever the stores
// do. To anyone but the deployment's operator it answers {"status": "ok"} and nothing
// else, ?include or not: what the process is and how its stores fare (its deployment,
// versions, index, outbox, replication, lag) is the operator's to read. The operator's
// token (`loomd token create --operator`) gets what the process is, pending_migrations
// (the last known list, not read anew), and with ?include=postgres the outbox's and
// the synchronous standbys' state and the serving projection's recorded failures, with
// ?include=lag how far the serving projection is behind and where, with ?include=workers
// the workers' queues, with ?include=namespaces every namespace's projection and index
// standing, with ?include=erasures the erasure sagas and their census, with
// ?include=extractions the extraction queue by status and with ?include=topic the change
// topic's latest envelopes (comma separated for several): the console's Operations view. A token that is wrong is 401; one that cannot be checked now gets the
// anonymous answer.
func (p *Process) handleHealth(c *fiber.Ctx) error {
	viewer, _, err := p.Tokens.Optional(c)
	var he *httperr.Error
	if errors.As(err, &he) && he.Status == http.StatusUnauthorized {
		return err
	}
	if err != nil || !viewer.Operator() {
		return c.JSON(fiber.Map{"status": "ok"})
	}
	body := fiber.Map{
		"status":             "ok",
		"version":            Version,
		"roles":              p.Cfg.Roles,
		"deployment_id":      p.DeploymentID,
		"pending_migrations": p.migrations.Last(),
		"clickhouse": fiber.Map{
			"version":         p.CH.Caps.Version,
			"cosine_distance": p.CH.Caps.CosineDistance,
		},
		"projection":   p.Cfg.Pipeline.Projection,
		"topic":        p.Cfg.Pipeline.Topic,
		"search_index": p.Cfg.SearchIndex.Mode,
	}
	// The index's warm-up and holdings: until it is warm, searches wait at the barrier.
	if h, ok := p.IndexHealth(); ok {
		body["index"] = h
	}
	// The workers' passes in this process: last run, rows done, rows owed, failures;
	// with include=workers, each joined by its queue below.
	var passes map[string]workers.PassHealth
	if p.Cfg.Roles.Has(config.RoleWorkers) && p.Workers != nil {
		passes = p.Workers.Health()
		body["passes"] = passes
	}
	include := strings.Split(c.Query("include"), ",")
	// One wait for everything the details read, so a frozen Postgres holds liveness
	// back by at most that.
	ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
	defer cancel()
	p.addHealthDetails(ctx, body, include, passes)
	return c.JSON(body)
}

// How many namespaces health's namespaces lists, and erasures its latest.
const (
	namespacesListed = 200
	erasuresListed   = 20
)

// namespaceStanding is one namespace as health's namespaces lists it: its generation,
// the serving projection's watermark and this process's index's position, and the
// seqs each is behind.
type namespaceStanding struct {
	watermarks.Standing
	ProjectionBehind int64  `json:"projection_behind"`
	IndexPosition    *int64 `json:"index_position,omitempty"`
	IndexBehind      *int64 `json:"index_behind,omitempty"`
	IndexHeld        *bool  `json:"index_held,omitempty"`
}

func (p *Process) namespaceStandings(ctx context.Context) fiber.Map {
	standings, total, err := watermarks.ReadStandings(ctx, p.PG, p.Cfg.Pipeline.Projection, namespacesListed)
	if err != nil {
		return fiber.Map{"error": err.Error()}
	}
	index := p.Index()
	out := make([]namespaceStanding, 0, len(standings))
	for _, s := range standings {
		ns := namespaceStanding{Standing: s, ProjectionBehind: max(s.Generation-s.Watermark, 0)}
		if index != nil {
			sp := searchindex.Space{Org: s.Org, Namespace: s.Namespace}
			pos, held := index.Position(sp), index.Held(sp)
			behind := max(s.Generation-pos, 0)
			ns.IndexPosition, ns.IndexBehind, ns.IndexHeld = &pos, &behind, &held
		}
		out = append(out, ns)
	}
	return fiber.Map{"total": total, "listed": out}
}

// handleReady answers 200 only when both stores answer, every migration this build
// carries is applied and the search index (when the process holds one) is warm; a load
// balancer sends no traffic before that. Each store is asked on its own, at once,
// within its own timeout: one that does not answer is the one reported failing, never
// the other. A failing check answers a stable code (POSTGRES_UNAVAILABLE,
// CLICKHOUSE_UNAVAILABLE, INDEX_WARMING), never the driver's text, which names
// addresses: that goes to the log.
func (p *Process) handleReady(c *fiber.Ctx) error {
	// Read once, before the checks' goroutines: fiber makes the user context on its
	// first read and stores it in the request's user values, which are not safe to
	// touch from two goroutines (two first reads at once panicked in fasthttp).
	reqCtx := c.UserContext()
	var pgErr, chErr error
	var wg sync.WaitGroup
	for _, check := range []struct {
		ping func(context.Context) error
		err  *error
	}{{p.PG.Ping, &pgErr}, {p.CH.Ping, &chErr}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(reqCtx, readyTimeout)
			defer cancel()
			*check.err = check.ping(ctx)
		}()
	}
	wg.Wait()
	checks := fiber.Map{}
	ready := true
	for _, st := range []struct {
		name, code string
		err        error
	}{{"postgres", httperr.CodePostgresDown, pgErr}, {"clickhouse", httperr.CodeClickHouseDown, chErr}} {
		if st.err != nil {
			checks[st.name], ready = st.code, false
			p.Log.Warn("readiness: a store does not answer", "store", st.name, "err", st.err)
		} else {
			checks[st.name] = "ok"
		}
	}
	// A process warming its index would answer its searches and judge its writes behind:
	// it takes traffic once it applied the topic as it stood at its start.
	if h, ok := p.IndexHealth(); ok {
		if h.Warm {
			checks["index"] = "warm"
		} else {
			checks["index"], ready = codeIndexWarming, false
		}
	}
	pending := p.migrations.Last()
	if ready {
		ctx, cancel := context.WithTimeout(reqCtx, readyTimeout)
		pending = p.migrations.Pending(ctx, 0)
		cancel()
	}
	if len(pending) > 0 {
		ready = false
	}
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
	}
	return c.Status(status).JSON(fiber.Map{"ready": ready, "checks": checks, "pending_migrations": pending})
}

// codeIndexWarming is readiness's check of an index that has not yet applied the topic
// as it stood at the process's start.
const codeIndexWarming = "INDEX_WARMING"

// readyTimeout bounds each of a readiness probe's checks.
const readyTimeout = 3 * time.Second

func (p *Process) handleMetrics(c *fiber.Ctx) error {
	var buf bytes.Buffer
	if err := p.Metrics.WriteText(&buf); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, metrics.ContentType)
	return c.Send(buf.Bytes())
}

// addHealthDetails adds what ?include asks for to an operator's health answer.
func (p *Process) addHealthDetails(ctx context.Context, body fiber.Map, include []string, passes map[string]workers.PassHealth) {
	if slices.Contains(include, "postgres") {
		body["postgres"] = p.postgresHealth(ctx)
	}
	p.addQueueDetails(ctx, body, include, passes)
}

// postgresHealth is ?include=postgres: the outbox, the projection's failures, the
// replication and the relay's hold.
func (p *Process) postgresHealth(ctx context.Context) any {
	ob, err := relay.ReadBacklog(ctx, p.PG)
	if err != nil {
		return healthFailed(err)
	}
	pgState := fiber.Map{"outbox_depth": ob.Depth, "oldest_unpublished_age_s": ob.OldestAgeS, "parked_deliveries": ob.Parked,
		"durability": p.Cfg.PG.Durability}
	if fs, err := projector.ReadFailureCounts(ctx, p.PG, p.Cfg.Pipeline.Projection); err == nil {
		pgState["projection_failures"] = fs
	} else {
		pgState["projection_failures"] = healthFailed(err)
	}
	if rep, err := pg.ReadReplication(ctx, p.PG); err == nil {
		pgState["replication"] = rep
	}
	// Rows the relay holds back until the synchronous standbys flush them.
	if r := p.relay.Load(); r != nil {
		pgState["relay"] = r.Held()
	}
	return pgState
}

// addQueueDetails adds the includes that read the queues, sagas and streams.
func (p *Process) addQueueDetails(ctx context.Context, body fiber.Map, include []string, passes map[string]workers.PassHealth) {
	// The workers' queues: owed, done, failures and the last item done, per worker, in
	// each pass's `queue`. `workers` repeats them by name, as before `passes` held them
	// (deprecated: read `passes`).
	if slices.Contains(include, "workers") {
		if q, err := workers.ReadQueueHealth(ctx, p.PG); err != nil {
			body["workers"] = healthFailed(err)
		} else {
			body["passes"] = workers.WithQueues(passes, q)
			body["workers"] = q
		}
	}
	// Every namespace's standing: the projection's and this process's index's distance
	// from its generation (lag names only the projection's furthest behind).
	if slices.Contains(include, "namespaces") {
		body["namespaces"] = p.namespaceStandings(ctx)
	}
	// The erasure sagas: how many run, completed or failed, and the latest with their census.
	if slices.Contains(include, "erasures") {
		if o, err := command.ReadErasureOverview(ctx, p.PG, erasuresListed); err != nil {
			body["erasures"] = healthFailed(err)
		} else {
			body["erasures"] = o
		}
	}
	// The deferred extractions of every org, by status, and the oldest still owed.
	if slices.Contains(include, "extractions") {
		if c, err := extractqueue.ReadCensus(ctx, p.PG); err != nil {
			body["extractions"] = healthFailed(err)
		} else {
			body["extractions"] = c
		}
	}
	// The change topic's latest records: where each sits and its envelope, content sealed.
	if slices.Contains(include, "topic") {
		if recs, err := p.topicTail(ctx); err != nil {
			body["topic_latest"] = healthFailed(err)
		} else {
			body["topic_latest"] = recs
		}
	}
	if slices.Contains(include, "lag") {
		if lag, err := projector.ReadLag(ctx, p.PG, p.Cfg.Pipeline.Projection); err != nil {
			body["lag"] = healthFailed(err)
		} else {
			body["lag"] = lag
		}
	}
}

func healthFailed(err error) fiber.Map { return fiber.Map{"error": err.Error()} }
