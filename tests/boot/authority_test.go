package boot

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

// Both stores record the deployment at first boot. A process configured for another
// deployment, or pointed at a Postgres that records another deployment or none under
// this ClickHouse, refuses to start.
func TestStoresOfAnotherDeploymentRefuseTheBoot(t *testing.T) {
	ctx := context.Background()
	id := env.Open(t, nil).DeploymentID
	if id == "" {
		t.Fatal("a booted node names no deployment")
	}
	conn := env.CH(t)
	var chID string
	if err := conn.QueryRow(ctx, "SELECT deployment_id FROM loom.storage_authority FINAL").Scan(&chID); err != nil || chID != id {
		t.Fatalf("ClickHouse records %q (%v); Postgres records %q", chID, err, id)
	}
	env.Open(t, func(c *config.Config) { c.Boot.DeploymentID = id })
	if _, err := app.Open(ctx, env.Config(func(c *config.Config) { c.Boot.DeploymentID = "another-deployment" }), quiet); err == nil ||
		!strings.Contains(err.Error(), "LOOM_DEPLOYMENT_ID is another-deployment but Postgres (LOOM_PG_DSN) records deployment "+id) {
		t.Fatalf("configured for another deployment: %v", err)
	}

	// An empty database where the deployment's should be: even a migrating boot refuses
	// to record a second deployment under this ClickHouse.
	dsn, pool := freshDatabase(t, false)
	_, err := app.Open(ctx, env.Config(func(c *config.Config) { c.PG.DSN = dsn; c.Boot.Migrate = true }), quiet)
	if err == nil || !strings.Contains(err.Error(), "Postgres (LOOM_PG_DSN) records no deployment while ClickHouse records deployment "+id) {
		t.Fatalf("a fresh Postgres under a recorded ClickHouse: %v", err)
	}
	if n := testenv.Int(t, pool, "SELECT count(*) FROM loom.authority"); n != 0 {
		t.Fatal("the refused boot recorded a deployment")
	}

	// A database that records another deployment.
	if _, err := pool.Exec(ctx, "INSERT INTO loom.authority (deployment_id) VALUES ('another-deployment')"); err != nil {
		t.Fatal(err)
	}
	for _, migrate := range []bool{false, true} {
		_, err := app.Open(ctx, env.Config(func(c *config.Config) { c.PG.DSN = dsn; c.Boot.Migrate = migrate }), quiet)
		if err == nil || !strings.Contains(err.Error(), "Postgres records deployment another-deployment and ClickHouse records deployment "+id) {
			t.Fatalf("Postgres of another deployment (migrate %v): %v", migrate, err)
		}
	}
}

// With LOOM_BOOT_MIGRATE=0 a process applies and records nothing. It refuses a Postgres
// that records no deployment; over one with a migration pending it starts, lists what
// is pending in health, stays unready, answers 503 MIGRATIONS_PENDING on memory routes
// and holds its relay back, and serves as soon as another process has applied it.
func TestBootMigrateOffWaitsForMigrations(t *testing.T) {
	ctx := context.Background()
	dsn, pool := freshDatabase(t, false)
	off := func(c *config.Config) { c.PG.DSN = dsn; c.Boot.Migrate = false }
	if _, err := app.Open(ctx, env.Config(off), quiet); err == nil || !strings.Contains(err.Error(), "Postgres (LOOM_PG_DSN) records no deployment") {
		t.Fatalf("LOOM_BOOT_MIGRATE=0 over an unmigrated Postgres: %v, want a refusal", err)
	}
	if n := testenv.Int(t, pool, "SELECT count(*) FROM pg_tables WHERE schemaname = 'loom'"); n != 0 {
		t.Fatalf("LOOM_BOOT_MIGRATE=0 applied migrations (%d tables)", n)
	}

	// A database of this deployment, migrated, that lacks a file this build carries.
	dsn, pool = freshDatabase(t, true)
	id := env.Open(t, nil).DeploymentID
	if _, err := pool.Exec(ctx, "INSERT INTO loom.authority (deployment_id) VALUES ($1)", id); err != nil {
		t.Fatal(err)
	}
	var file, sha string
	if err := pool.QueryRow(ctx, `DELETE FROM loom.pg_migrations WHERE filename = (SELECT max(filename) FROM loom.pg_migrations)
		RETURNING filename, sha256`).Scan(&file, &sha); err != nil {
		t.Fatal(err)
	}
	log, logged := capture()
	n := env.OpenLogged(t, func(c *config.Config) {
		off(c)
		c.Roles = config.Roles{config.RoleCommand, config.RoleQuery, config.RoleRelay}
	}, log)
	anon := testenv.NewClient(env.ServeURL(t, n), "")
	c := testenv.NewClient(anon.URL, env.Token(t, n, auth.NewToken{Org: org}))
	want := "pg:" + file
	operator := testenv.NewClient(anon.URL, env.Token(t, n, auth.NewToken{Role: auth.RoleOperator}))
	health := operator.Do(t, http.MethodGet, "/v1/health", nil).JSON(t)
	if p, _ := health["pending_migrations"].([]any); len(p) != 1 || p[0] != want {
		t.Fatalf("health lists pending %v, want [%s]", health["pending_migrations"], want)
	}
	if r := anon.Do(t, http.MethodGet, "/v1/health/ready", nil); r.Status != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), want) {
		t.Fatalf("ready with %s pending: %d %s", want, r.Status, r.Body)
	}
	ns := testenv.Unique(t, "gated")
	for _, call := range testenv.MemoryCalls(ns) {
		if r := c.Call(t, call); !r.Retryable503(t, "MIGRATIONS_PENDING") || !strings.Contains(string(r.Body), want) {
			t.Fatalf("%s %s with %s pending: %d %s", call.Method, call.Path, want, r.Status, r.Body)
		}
	}
	testenv.Eventually(t, 10*time.Second, "the relay to say it waits for migrations", func() bool {
		return logged.Contains("waiting for migrations before starting") && logged.Contains("role=relay")
	})

	// Another process applies it (here: its ledger row comes back); this one serves.
	if _, err := pool.Exec(ctx, "INSERT INTO loom.pg_migrations (filename, sha256) VALUES ($1, $2)", file, sha); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "readiness once the migration is applied", func() bool {
		return anon.Do(t, http.MethodGet, "/v1/health/ready", nil).Status == http.StatusOK
	})
	c.Set(t, ns, "k", "served once migrated")
	if r := c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/k", nil); r.Status != http.StatusOK {
		t.Fatalf("read once migrated: %d %s", r.Status, r.Body)
	}
}

// A ClickHouse migration this build carries and the server lacks is listed with a
// ch: prefix and keeps the process unready, as a Postgres one does.
func TestPendingClickHouseMigrationKeepsTheProcessUnready(t *testing.T) {
	ctx := context.Background()
	conn := env.CH(t)
	const file = "004_storage_authority.sql"
	var sha string
	if err := conn.QueryRow(ctx, "SELECT sha256 FROM loom.ch_migrations FINAL WHERE filename = ?", file).Scan(&sha); err != nil {
		t.Fatal(err)
	}
	restore := func() {
		batch, err := conn.PrepareBatch(ctx, "INSERT INTO loom.ch_migrations (filename, sha256, skipped, server_version, recorded_ns, applied_at)")
		if err == nil {
			err = batch.Append(file, sha, uint8(0), conn.Caps.Version, uint64(time.Now().UnixNano()), time.Now().UTC())
		}
		if err == nil {
			err = batch.Send()
		}
		if err != nil {
			t.Fatalf("restore the ClickHouse ledger row: %v", err)
		}
	}
	if err := conn.Exec(ctx, "ALTER TABLE loom.ch_migrations DELETE WHERE filename = '"+file+"'"); err != nil {
		t.Fatal(err)
	}
	restored := false
	t.Cleanup(func() {
		if !restored {
			restore()
		}
	})
	testenv.Eventually(t, 30*time.Second, "the ledger row's deletion", func() bool {
		var n uint64
		conn.QueryRow(ctx, "SELECT count() FROM loom.ch_migrations FINAL WHERE filename = ?", file).Scan(&n)
		return n == 0
	})
	n := env.Open(t, func(c *config.Config) { c.Roles = config.Roles{config.RoleQuery} })
	anon := testenv.NewClient(env.ServeURL(t, n), "")
	r := anon.Do(t, http.MethodGet, "/v1/health/ready", nil)
	if r.Status != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), `"ch:`+file+`"`) {
		t.Fatalf("ready with %s pending in ClickHouse: %d %s", file, r.Status, r.Body)
	}
	restore()
	restored = true
	testenv.Eventually(t, 10*time.Second, "readiness once the ClickHouse migration is back", func() bool {
		return anon.Do(t, http.MethodGet, "/v1/health/ready", nil).Status == http.StatusOK
	})
}
