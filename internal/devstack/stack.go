// Package devstack starts the stores Loom needs on this machine: a private Postgres
// cluster and a ClickHouse server from the installed Debian packages, each on free
// loopback ports under one directory, and an in-process Kafka (kfake) speaking the
// real wire protocol. `loomd dev` and the test suites use the same starter, so the
// tests run against exactly what a newcomer runs.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/kek"
)

// Options says which stores to start and where they keep their data.
type Options struct {
	// Dir holds every store's data; a second start over the same Dir keeps the data.
	// Empty: a temporary directory, removed again by Stop (tests).
	Dir string
	// TempRoot is where that temporary directory is made; empty: os.TempDir().
	TempRoot string
	// Durable keeps fsync on. Tests turn it off: their data is thrown away.
	Durable bool
	// KafkaPageCache leaves the broker's writes to the page cache even when Durable, as
	// a Kafka broker does by default (it flushes on segment roll, and acks=all's
	// replicas are its durability): the bench's setting. A durable kfake fsyncs every
	// produced batch and every offset commit on its one request loop, so every
	// consumer group's commit queues the relay's produce behind an fsync.
	KafkaPageCache bool
	// KafkaPort is the broker's loopback port; 0 picks a free one.
	KafkaPort int
	// Topics are created with Partitions partitions when Kafka starts empty.
	Topics     []string
	Partitions int32
	// SyncStandby also starts a streaming standby of Postgres on a second loopback
	// port and makes it the primary's synchronous standby (synchronous_standby_names):
	// the production shape of the Postgres authority.
	SyncStandby bool
	// Skip* leave a store out (a test of one store need not pay for the others).
	SkipPostgres, SkipClickHouse, SkipKafka bool
	// Log receives one line per step; nil discards.
	Log io.Writer
}

// Stack is a running set of stores.
type Stack struct {
	opts       Options
	tempDir    string
	Postgres   *Postgres
	Standby    *Postgres // with Options.SyncStandby
	ClickHouse *ClickHouse
	Kafka      *Kafka
	// KEK is the stack's key-encryption key (LOOM_KEK), kept in Dir beside the data it
	// opens, so a second start over the same Dir reads the keys the first one wrapped.
	KEK string
}

// Start brings up every store Options asks for, or none: on failure the stores
// already started are stopped again.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	var tempDir string
	if opts.Dir == "" {
		d, err := os.MkdirTemp(opts.TempRoot, "loom-devstack-")
		if err != nil {
			return nil, fmt.Errorf("devstack: temporary directory: %w", err)
		}
		// MkdirTemp makes 0700; Postgres runs as its own user and must traverse it.
		if err := os.Chmod(d, 0o755); err != nil {
			return nil, fmt.Errorf("devstack: %w", err)
		}
		opts.Dir, tempDir = d, d
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("devstack: resolve %s: %w", opts.Dir, err)
	}
	opts.Dir = dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("devstack: create %s: %w", dir, err)
	}
	s := &Stack{opts: opts, tempDir: tempDir}
	if s.KEK, err = keptKEK(filepath.Join(dir, "kek")); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	// Postgres (initdb and start) and ClickHouse start side by side: each mostly waits
	// for its own server, and a test package starts both before its first test.
	var stores errgroup.Group
	if !opts.SkipPostgres {
		s.Postgres = &Postgres{dir: filepath.Join(dir, "postgres"), durable: opts.Durable, log: opts.Log}
		if opts.SyncStandby {
			s.Standby = &Postgres{dir: filepath.Join(dir, "postgres-standby"), durable: opts.Durable, log: opts.Log, primary: s.Postgres}
		}
		stores.Go(func() error {
			if err := s.Postgres.Start(ctx); err != nil {
				return err
			}
			if s.Standby == nil {
				return nil
			}
			if err := s.Standby.Start(ctx); err != nil {
				return err
			}
			return s.Postgres.RequireSyncStandby(ctx, StandbyName)
		})
	}
	if !opts.SkipClickHouse {
		s.ClickHouse = &ClickHouse{dir: filepath.Join(dir, "clickhouse"), log: opts.Log}
		stores.Go(func() error { return s.ClickHouse.Start(ctx) })
	}
	if err := stores.Wait(); err != nil {
		return nil, err
	}
	if !opts.SkipKafka {
		s.Kafka = &Kafka{dir: filepath.Join(dir, "kafka"), port: opts.KafkaPort, durable: opts.Durable && !opts.KafkaPageCache,
			topics: opts.Topics, partitions: opts.Partitions, log: opts.Log}
		if err := s.Kafka.Start(ctx); err != nil {
			return nil, err
		}
	}
	ok = true
	return s, nil
}

// Stop stops every store, Kafka first (it is in-process and quick), and reports
// every failure. A stack in a temporary directory (tests) is thrown away: its stores
// are killed, not shut down in order, since nothing reads their data again; ClickHouse's
// orderly shutdown took 4 s at the end of each test package.
func (s *Stack) Stop() error {
	discard := s.tempDir != ""
	var errs []error
	if s.Kafka != nil {
		s.Kafka.Stop()
	}
	if s.ClickHouse != nil {
		if discard {
			errs = append(errs, s.ClickHouse.kill())
		} else {
			errs = append(errs, s.ClickHouse.Stop())
		}
	}
	for _, p := range []*Postgres{s.Standby, s.Postgres} {
		if p == nil {
			continue
		}
		if discard {
			errs = append(errs, p.stop("immediate"))
		} else {
			errs = append(errs, p.Stop())
		}
	}
	if s.tempDir != "" {
		errs = append(errs, os.RemoveAll(s.tempDir))
	}
	return errors.Join(errs...)
}

// Dir is the directory that holds the stores' data (removed by Stop when temporary).
func (s *Stack) Dir() string { return s.opts.Dir }

func logf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "devstack: "+format+"\n", args...)
}

// Configure points cfg at the stack's stores, and gives it the stack's KEK unless it
// has one. One Postgres without a standby has none to wait for, so it runs with local
// durability; with Options.SyncStandby, synchronous.
func (s *Stack) Configure(cfg *config.Config) {
	if s.Postgres != nil {
		cfg.PG.DSN = s.Postgres.DSN()
		cfg.PG.Durability = config.DurabilityLocal
		if s.Standby != nil {
			cfg.PG.Durability = config.DurabilitySynchronous
		}
	}
	if s.ClickHouse != nil {
		cfg.ClickHouse.Addr = []string{s.ClickHouse.Addr()}
	}
	if s.Kafka != nil {
		cfg.Kafka.Brokers = s.Kafka.Brokers()
	}
	if cfg.Keys.KEK == "" {
		cfg.Keys.KEK = s.KEK
	}
}

// keptKEK reads the KEK kept in file, or makes one and keeps it there.
func keptKEK(file string) (string, error) {
	if b, err := os.ReadFile(file); err == nil {
		return strings.TrimSpace(string(b)), nil
	} else if !os.IsNotExist(err) {
		return "", fmt.Errorf("devstack: read the KEK: %w", err)
	}
	k, err := kek.Generate()
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(file, []byte(k+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("devstack: keep the KEK: %w", err)
	}
	return k, nil
}
