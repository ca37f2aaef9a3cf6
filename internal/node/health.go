package node

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/loomplane/loom/internal/metrics"
	"github.com/loomplane/loom/internal/pg"
)

func (n *Node) registerHealth(app *fiber.App) {
	app.Get("/v1/health", n.handleHealth)
	app.Get("/v1/health/ready", n.handleReady)
	app.Get("/metrics", n.handleMetrics)
	gaugesOf(n.Metrics, &scrapeCache[outboxStats]{read: n.outboxStats}, []statGauge[outboxStats]{
		{"loom_outbox_depth", "Outbox records not yet published to Kafka.", func(s outboxStats) int64 { return s.Depth }},
		{"loom_outbox_parked", "Outbox records parked after Kafka refused them (a loom.parked placeholder took each one's seq).",
			func(s outboxStats) int64 { return s.Parked }},
	})
	gaugesOf(n.Metrics, &scrapeCache[failureStats]{read: n.failureStats}, []statGauge[failureStats]{
		{"loom_projection_failed_records", "Records the serving projection could not apply, recorded for the repair pass.",
			func(s failureStats) int64 { return s.Failed }},
		{"loom_projection_held_records", "Records the serving projection holds behind a failure of their namespace.",
			func(s failureStats) int64 { return s.Held }},
		{"loom_projection_held_namespaces", "Namespaces whose watermark a recorded failure holds (their searches answer PROJECTION_BEHIND).",
			func(s failureStats) int64 { return s.Namespaces }},
	})
	// Per-namespace lag would be a series per namespace: /metrics carries the totals
	// and the furthest namespace, ?include=lag names the ten furthest.
	gaugesOf(n.Metrics, &scrapeCache[projectionLag]{read: n.projectionLag}, []statGauge[projectionLag]{
		{"loom_projection_namespaces_behind", "Namespaces whose serving-projection watermark is below their Postgres generation.",
			func(l projectionLag) int64 { return l.NamespacesBehind }},
		{"loom_projection_seqs_behind", "Seqs the serving projection has yet to apply, summed over the namespaces.",
			func(l projectionLag) int64 { return l.SeqsBehind }},
		{"loom_projection_max_seqs_behind", "Seqs the serving projection has yet to apply in the namespace furthest behind.",
			func(l projectionLag) int64 {
				if len(l.Behind) == 0 {
					return 0
				}
				return l.Behind[0].Generation - l.Behind[0].Watermark
			}},
	})
}

// statGauge is a gauge read from one field of a statistic.
type statGauge[T any] struct {
	name, help string
	of         func(T) int64
}

// gaugesOf registers gauges that read their statistic from cache at scrape time; -1
// when it cannot be read.
func gaugesOf[T any](reg *metrics.Registry, cache *scrapeCache[T], gauges []statGauge[T]) {
	for _, g := range gauges {
		reg.GaugeFunc(g.name, g.help, func() float64 {
			v, err := cache.get()
			if err != nil {
				return -1
			}
			return float64(g.of(v))
		})
	}
}

// scrapeCache reads a value for the gauges of one scrape that share it: once, not
// once per gauge.
type scrapeCache[T any] struct {
	read func(context.Context) (T, error)

	mu  sync.Mutex
	at  time.Time
	v   T
	err error
}

func (c *scrapeCache[T]) get() (T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) > time.Second {
		c.v, c.err = c.read(context.Background())
		c.at = time.Now()
	}
	return c.v, c.err
}

// handleHealth is liveness plus what the process is: it answers while the process
// runs, whatever the stores do (pending_migrations is the last known list, not read
// anew). ?include=postgres adds the outbox's and the synchronous standbys' state and
// the serving projection's recorded failures, and
// ?include=lag the namespaces the serving projection is behind on (comma separated
// for both).
func (n *Node) handleHealth(c *fiber.Ctx) error {
	body := fiber.Map{
		"status":             "ok",
		"version":            Version,
		"roles":              n.Cfg.Roles,
		"deployment_id":      n.DeploymentID,
		"pending_migrations": n.lastPending(),
		"clickhouse": fiber.Map{
			"version":         n.CH.Caps.Version,
			"cosine_distance": n.CH.Caps.CosineDistance,
		},
		"projection": n.Cfg.Projection,
		"topic":      n.Cfg.Topic,
	}
	include := strings.Split(c.Query("include"), ",")
	if slices.Contains(include, "postgres") {
		ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
		defer cancel()
		ob, err := n.outboxStats(ctx)
		if err != nil {
			body["postgres"] = fiber.Map{"error": err.Error()}
		} else {
			pgState := fiber.Map{"outbox_depth": ob.Depth, "oldest_unpublished_age_s": ob.OldestAgeS, "parked_deliveries": ob.Parked,
				"durability": n.Cfg.PGDurability}
			if fs, err := n.failureStats(ctx); err == nil {
				pgState["projection_failures"] = fs
			} else {
				pgState["projection_failures"] = fiber.Map{"error": err.Error()}
			}
			if rep, err := pg.ReadReplication(ctx, n.PG); err == nil {
				pgState["replication"] = rep
			}
			if r := n.relay.Load(); r != nil {
				pgState["relay"] = r.Held()
			}
			body["postgres"] = pgState
		}
	}
	if slices.Contains(include, "lag") {
		if lag, err := n.projectionLag(c.UserContext()); err != nil {
			body["lag"] = fiber.Map{"error": err.Error()}
		} else {
			body["lag"] = lag
		}
	}
	return c.JSON(body)
}

type outboxStats struct {
	Depth      int64
	Parked     int64
	OldestAgeS float64
}

func (n *Node) outboxStats(ctx context.Context) (outboxStats, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var s outboxStats
	err := n.PG.QueryRow(ctx, `SELECT count(*) FILTER (WHERE parked_at IS NULL), count(*) FILTER (WHERE parked_at IS NOT NULL),
		coalesce(extract(epoch FROM now() - min(created_at) FILTER (WHERE parked_at IS NULL)), 0)::float8
		FROM loom.outbox`).Scan(&s.Depth, &s.Parked, &s.OldestAgeS)
	return s, err
}

// handleReady answers 200 only when both stores answer and every migration this build
// carries is applied; a load balancer sends no traffic before that.
func (n *Node) handleReady(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), 3*time.Second)
	defer cancel()
	checks := fiber.Map{}
	ready := true
	if err := n.PG.Ping(ctx); err != nil {
		checks["postgres"], ready = err.Error(), false
	} else {
		checks["postgres"] = "ok"
	}
	if err := n.CH.Ping(ctx); err != nil {
		checks["clickhouse"], ready = err.Error(), false
	} else {
		checks["clickhouse"] = "ok"
	}
	pending := n.lastPending()
	if ready {
		pending = n.refreshMigrations(ctx, 0)
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

func (n *Node) handleMetrics(c *fiber.Ctx) error {
	var buf bytes.Buffer
	if err := n.Metrics.WriteText(&buf); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, metrics.ContentType)
	return c.Send(buf.Bytes())
}
