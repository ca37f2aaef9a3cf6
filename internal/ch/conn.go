// Package ch is Loom's ClickHouse plumbing: the connection, the capability probe that
// lets one build serve both the 18.16 test server and a current production server, and
// the migrator.
package ch

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Database is the database every Loom table lives in.
const Database = "loom"

// Config names the server.
type Config struct {
	Addr         []string
	Username     string
	Password     string
	DialTimeout  time.Duration
	ReadTimeout  time.Duration
	MaxOpenConns int
	// Cluster names the ClickHouse cluster of a replicated deployment (LOOM_CH_CLUSTER);
	// empty for one server.
	Cluster string
}

// MaxQueryBytes is the longest statement text, arguments bound, that Loom's
// connections let the server parse.
const MaxQueryBytes = 16 << 20

// Conn is a connection pool with the server's probed capabilities.
type Conn struct {
	driver.Conn
	Caps    Capabilities
	Cluster string
}

// Open connects, pings and probes the server.
func Open(ctx context.Context, cfg Config) (*Conn, error) {
	if len(cfg.Addr) == 0 {
		return nil, fmt.Errorf("ClickHouse address is empty (LOOM_CH_ADDR)")
	}
	opts := &clickhouse.Options{
		Addr:         cfg.Addr,
		Auth:         clickhouse.Auth{Database: "default", Username: cfg.Username, Password: cfg.Password},
		DialTimeout:  orDefault(cfg.DialTimeout, 5*time.Second),
		ReadTimeout:  orDefault(cfg.ReadTimeout, 60*time.Second),
		MaxOpenConns: cfg.MaxOpenConns,
		// No statement of Loom's is written to system.query_log: the driver binds the
		// arguments into a statement's text (user ids, keys, a search's words), and the
		// log keeps it beyond any erasure (docs/architecture.md, "Erasure at rest").
		//
		// The driver's bound arguments also count against max_query_size (256 KiB by
		// default): an erasure's mutation names every seq of the user's graph records
		// (~40 bytes each), so a user with ~6,500 of them could never be erased. Reads
		// that name a batch's keys split themselves (projector/graph_state.go); this
		// bounds what one statement may name instead of refusing it.
		Settings: clickhouse.Settings{"log_queries": 0, "max_query_size": MaxQueryBytes},
	}
	if opts.Auth.Username == "" {
		opts.Auth.Username = "default"
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("open ClickHouse %v: %w", cfg.Addr, err)
	}
	pctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancel()
	if err := conn.Ping(pctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("ping ClickHouse %v: %w", cfg.Addr, err)
	}
	caps, err := Probe(ctx, conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if cfg.Cluster != "" && !caps.AtLeast(MinClusterMajor, MinClusterMinor) {
		conn.Close()
		return nil, fmt.Errorf("LOOM_CH_CLUSTER=%s needs ClickHouse %d.%d or newer (Keeper, insert_quorum 'auto'); %v runs %s",
			cfg.Cluster, MinClusterMajor, MinClusterMinor, cfg.Addr, caps.Version)
	}
	return &Conn{Conn: conn, Caps: caps, Cluster: cfg.Cluster}, nil
}

// Ctx returns ctx carrying the settings every Loom statement runs with.
func (c *Conn) Ctx(ctx context.Context) context.Context {
	s := sessionSettings(c.Caps, c.Cluster)
	if len(s) == 0 {
		return ctx
	}
	return clickhouse.Context(ctx, clickhouse.WithSettings(s))
}

// sessionSettings: recent servers turn asynchronous inserts on by default, and Loom's
// inserts must be durable when they return, so it is turned off wherever the server
// knows the setting. On a cluster an insert returns only once a majority of the
// replicas hold it, so a projector's watermark never runs ahead of what a query
// served by another replica of a two-replica shard can read.
func sessionSettings(caps Capabilities, cluster string) clickhouse.Settings {
	s := clickhouse.Settings{}
	if caps.AsyncInsert {
		s["async_insert"] = 0
	}
	if cluster != "" {
		s["insert_quorum"] = "auto"
		s["insert_quorum_parallel"] = 0
	}
	return s
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Each runs q and hands each result row's Scan to scan, in order.
func (c *Conn) Each(ctx context.Context, q string, args []any, scan func(func(dest ...any) error) error) error {
	rows, err := c.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}
