package boot

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/devstack"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/tests/testenv"
)

// With its synchronous standby streaming, LOOM_PG_DURABILITY=synchronous (the default)
// boots without a warning, and health shows the standby attached.
func TestSynchronousBootsWithItsStandbyAttached(t *testing.T) {
	log, logged := capture()
	n := env.OpenLogged(t, func(c *config.Config) { c.PG.Durability = config.DurabilitySynchronous }, log)
	if logged.Contains("standby") {
		t.Fatalf("boot with the standby attached warned:\n%s", logged)
	}
	c := env.Operator(t, env.ServeURL(t, n))
	body := c.Do(t, http.MethodGet, "/v1/health?include=postgres", nil).JSON(t)
	pgState := body["postgres"].(map[string]any)
	rep, _ := pgState["replication"].(map[string]any)
	if pgState["durability"] != "synchronous" || rep["synchronous_standby_names"] != devstack.StandbyName || rep["sync_standbys_attached"] != float64(1) {
		t.Fatalf("health with the standby attached: %v", pgState)
	}
}

// Without synchronous_standby_names a synchronous boot refuses, naming what is missing
// and the way out; a local one boots and warns.
func TestBootRefusesWithoutASynchronousStandbyConfigured(t *testing.T) {
	ctx := context.Background()
	requireStandbyAttached(t)
	if err := env.Stack.Postgres.RequireSyncStandby(ctx, ""); err != nil {
		t.Fatal(err)
	}
	_, err := app.Open(ctx, env.Config(func(c *config.Config) { c.PG.Durability = config.DurabilitySynchronous }), quiet)
	if err == nil || !strings.Contains(err.Error(), "synchronous_standby_names is empty") || !strings.Contains(err.Error(), "LOOM_PG_DURABILITY=local") {
		t.Fatalf("synchronous boot without a synchronous standby: %v, want a refusal naming synchronous_standby_names", err)
	}
	log, logged := capture()
	env.OpenLogged(t, func(c *config.Config) { c.PG.Durability = config.DurabilityLocal }, log)
	if !logged.Contains("no synchronous standby is configured") {
		t.Fatalf("local boot without a standby did not warn:\n%s", logged)
	}
}

// The synchronous standby stops while writers run. A write is answered 200 only when
// its commit reached the standby: started detached afterwards, the standby holds every
// write that answered 200. The others wait for it until the write deadline and answer a
// retryable 503 (outcome_unknown when the commit was sent). A boot meanwhile warns that
// no standby is attached, and once the standby is back the waiting commits land and
// writes succeed again.
func TestStandbyStoppedWritesWaitAndAre503NeverAcknowledged(t *testing.T) {
	ctx := context.Background()
	requireStandbyAttached(t)
	const deadline = 1500 * time.Millisecond
	n, url := env.API(t, func(c *config.Config) { c.Command.WriteDeadline = deadline })
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	ns := testenv.Unique(t, "sync")

	writers := testenv.StartWriters(t, c, ns, "written while the standby stops", 3)
	writers.WaitFor(t, 20)
	if err := env.Stack.Standby.Stop(); err != nil {
		t.Fatal(err)
	}

	// A write begun after the standby stopped, in a namespace of its own (the writers'
	// namespace is locked by their waiting commits), reaches its COMMIT, waits out its
	// deadline there, and answers 503 with outcome_unknown: it committed on the primary.
	other := testenv.Unique(t, "alone")
	start := time.Now()
	r := c.Do(t, http.MethodPut, "/v1/namespaces/"+other+"/memories/after-stop", []byte(`{"value": "committed on the primary alone"}`))
	waited := time.Since(start)
	answers := writers.Stop()
	e, _ := r.JSON(t)["error"].(map[string]any)
	if r.Status != http.StatusServiceUnavailable || r.ErrorCode() != "POSTGRES_UNAVAILABLE" || e["retryable"] != true || e["outcome_unknown"] != true {
		t.Fatalf("write with the standby stopped: %d %s; want 503 POSTGRES_UNAVAILABLE, retryable, outcome_unknown", r.Status, r.Body)
	}
	if waited < deadline {
		t.Fatalf("answered after %s, before the write deadline %s: the commit did not wait for the standby", waited, deadline)
	}

	// Booting now warns: configured, not attached; it does not refuse.
	log, logged := capture()
	env.OpenLogged(t, nil, log)
	if !logged.Contains("none is attached") {
		t.Fatalf("boot with the standby stopped did not warn:\n%s", logged)
	}

	// What the standby holds is what a failover would serve: every acknowledged write.
	if err := env.Stack.Standby.StartDetached(ctx); err != nil {
		t.Fatal(err)
	}
	// Its session opens the org's key as loomd's do: the journal names a key by its
	// reference (loom.key_ref, migration 171).
	standbyCfg, err := pgx.ParseConfig(env.Stack.Standby.DSN())
	if err != nil {
		t.Fatal(err)
	}
	standbyCfg.RuntimeParams[kek.SessionParam] = env.KEKSession(t)
	standby, err := pgx.ConnectConfig(ctx, standbyCfg)
	if err != nil {
		t.Fatal(err)
	}
	onStandby := func(ns, key, version string) bool {
		var n int
		q := `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND memory_key = (SELECT loom.key_ref($1, $3))`
		args := []any{org, ns, key}
		if version != "" {
			q += ` AND version = $4::bigint`
			args = append(args, version)
		}
		if err := standby.QueryRow(ctx, q, args...).Scan(&n); err != nil {
			t.Fatalf("read the standby: %v", err)
		}
		return n == 1
	}
	acked, refused := 0, 0
	for _, a := range answers {
		switch {
		case a.Status == http.StatusOK:
			acked++
			if !onStandby(ns, a.Key, a.Version) {
				t.Errorf("write %s answered 200 at version %s, but the standby does not hold it", a.Key, a.Version)
			}
		case a.Status == http.StatusServiceUnavailable && (a.Code == "POSTGRES_UNAVAILABLE" || a.Code == "ADMISSION_CONTENDED" ||
			a.Code == "CLICKHOUSE_UNAVAILABLE" || a.Code == "PROJECTION_BEHIND"):
			// A write whose deadline ran out while it waited answers the retryable
			// 503 of the step it was in.
			refused++
		default:
			t.Errorf("write %s answered %d %s: want 200 or a retryable 503", a.Key, a.Status, a.Code)
		}
	}
	if onStandby(other, "after-stop", "") {
		t.Fatal("the write answered 503 is on the standby: the standby was not stopped when it committed")
	}
	standby.Close(ctx)
	if acked == 0 || refused == 0 {
		t.Fatalf("%d writes acknowledged and %d refused: the test needs both sides of the outage", acked, refused)
	}
	t.Logf("%d writes acknowledged, all on the standby; %d answered 503 while it was away", acked, refused)

	// Reattached, the standby releases the commits that waited for it, and writes succeed.
	if err := env.Stack.Standby.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := env.Stack.Standby.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	pool := env.PG(t)
	testenv.Eventually(t, 30*time.Second, "the commit that waited for the standby to land", func() bool {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND memory_key = (SELECT loom.key_ref($1, 'after-stop'))`, org, other) == 1
	})
	c.Set(t, ns, "after-reattach", "the standby is back")
}
