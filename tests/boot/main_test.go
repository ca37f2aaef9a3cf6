// Package boot checks what a loomd process verifies before it serves, against a
// Postgres primary with a synchronous standby (two clusters streaming on loopback),
// ClickHouse and kfake: LOOM_PG_DURABILITY, the deployment both stores record,
// LOOM_BOOT_MIGRATE=0, and what writes do when the synchronous standby goes away.
// Tests run one at a time and leave the standby attached as they found it.
package boot

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/devstack"
	"github.com/loomplane/loom/internal/pg"
	pgmigrations "github.com/loomplane/loom/schemas/postgres"
	"github.com/loomplane/loom/tests/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.MainWith(m, testenv.Options{SyncStandby: true}, &env, nil)
}

const org = "acme"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// logBuffer keeps what a node logged, for tests that assert on its warnings.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) Contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.b.String(), s)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func capture() (*slog.Logger, *logBuffer) {
	buf := &logBuffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo})), buf
}

// freshDatabase creates an empty database on the primary, as a misconfigured
// LOOM_PG_DSN would name, and returns its DSN; migrate applies the schema to it.
func freshDatabase(t *testing.T, migrate bool) (string, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	name := strings.ReplaceAll(testenv.Unique(t, "db"), "-", "_")
	dsn, err := env.Stack.Postgres.FreshDatabase(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pg.Open(ctx, pg.PoolConfig{DSN: dsn, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if migrate {
		if _, err := pg.Migrate(ctx, pool, pgmigrations.Files, quiet); err != nil {
			t.Fatal(err)
		}
	}
	return dsn, pool
}

// requireStandbyAttached puts the standby back as the primary's synchronous standby
// when the test ends, whatever the test did to it.
func requireStandbyAttached(t *testing.T) {
	t.Cleanup(func() {
		ctx := context.Background()
		env.Stack.Standby.Stop()
		if err := env.Stack.Standby.Restart(ctx); err != nil {
			t.Errorf("restart the standby: %v", err)
		}
		if err := env.Stack.Postgres.RequireSyncStandby(ctx, devstack.StandbyName); err != nil {
			t.Errorf("reattach the standby: %v", err)
		}
	})
}
