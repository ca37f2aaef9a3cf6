package faults

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	typed "github.com/loomplane/loom/client"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/projector"
	"github.com/loomplane/loom/relay"
	"github.com/loomplane/loom/tests/testenv"
)

// A namespace whose rows ClickHouse keeps refusing stops no other: after
// LOOM_PROJECTOR_BATCH_ATTEMPTS tries its records are recorded in
// loom.projection_failures with the reason and its watermark is held, so its searches
// answer PROJECTION_BEHIND rather than read a gap; the failure is counted in
// /v1/health?include=postgres and /metrics; the other namespace projects and searches
// as usual throughout. Once ClickHouse takes the rows again, the repair pass reads
// them back from the topic and applies them, and the namespace ends equal to the
// journal with nothing recorded.
func TestAFailingNamespaceIsRecordedRepairedAndStopsNoOther(t *testing.T) {
	p := projection(t)
	bad, good := testenv.Unique(t, "refused"), testenv.Unique(t, "unharmed")
	var refusing atomic.Bool
	refusing.Store(true)
	faults := projector.Faults{BeforeInsert: func(_, namespace string) error {
		if namespace == bad && refusing.Load() {
			return errors.New("injected: ClickHouse refuses the rows of " + namespace)
		}
		return nil
	}}
	n, url := env.API(t, func(cfg *config.Config) {
		cfg.Pipeline.Projection = p
		cfg.Query.ProjectionWait = 500 * time.Millisecond
	})
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	env.FaultyProjector(t, p, faults, func(cfg *config.Config) {
		cfg.Projector.Attempts = 2
		cfg.Projector.RepairInterval = 500 * time.Millisecond
	})
	env.Relay(t, relay.Faults{})
	pool, conn := env.PG(t), env.CH(t)
	c.AppendOnly(t, bad, good)
	for i := 0; i < 10; i++ {
		c.Set(t, bad, fmt.Sprintf("fact-%02d", i), fmt.Sprintf("refused fact number %d", i))
		c.Set(t, good, fmt.Sprintf("fact-%02d", i), fmt.Sprintf("unharmed fact number %d", i))
	}
	caughtUp := func(ns string) bool {
		return testenv.Watermark(t, pool, p, org, ns) == testenv.Generation(t, pool, org, ns)
	}
	failures := func() int64 {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.projection_failures WHERE projection = $1 AND org = $2 AND namespace = $3`, p, org, bad)
	}
	testenv.Eventually(t, 60*time.Second, "the refused namespace's records to be recorded as failures", func() bool {
		return caughtUp(good) && failures() == testenv.Generation(t, pool, org, bad)
	})
	if wm := testenv.Watermark(t, pool, p, org, bad); wm != 0 {
		t.Fatalf("the refused namespace's watermark moved to %d past its failures", wm)
	}
	reasons := testenv.PGStrings(t, pool, `SELECT DISTINCT reason FROM loom.projection_failures WHERE projection = $1 AND NOT held`, p)
	if len(reasons) != 1 || !strings.Contains(reasons[0], "injected: ClickHouse refuses the rows of "+bad) {
		t.Fatalf("recorded reasons %q, want the refusal", reasons)
	}

	// Counted where an operator looks.
	health, err := env.Operator(t, url).Typed(t).Health(context.Background(), "postgres")
	if err != nil || health.Postgres == nil || health.Postgres.ProjectionFailures == nil {
		t.Fatalf("health: %v %+v", err, health)
	}
	if pf := health.Postgres.ProjectionFailures; pf.Failed < 1 || pf.Failed+pf.Held != 10 || pf.Namespaces != 1 {
		t.Fatalf("health projection_failures = %+v, want 10 records of one namespace", *pf)
	}
	testenv.Eventually(t, 10*time.Second, "/metrics to count the held namespace", func() bool {
		return strings.Contains(metricsText(t, url), "\nloom_projection_held_namespaces 1\n")
	})

	// The refused namespace answers PROJECTION_BEHIND; the other searches and takes
	// writes as usual.
	if _, err := c.Typed(t).Search(context.Background(), bad, typed.SearchRequest{Query: "refused fact number 3", TopK: 3}); !testenv.Retryable503(err, typed.CodeProjectionBehind) {
		t.Fatalf("search of the held namespace: %v", err)
	}
	c.Set(t, good, "fact-10", "unharmed fact number 10")
	testenv.Eventually(t, 30*time.Second, "the other namespace to project past the failure", func() bool { return caughtUp(good) })
	if r := c.Search(t, good, "unharmed fact number 10", 3); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"memory_key":"fact-10"`) {
		t.Fatalf("search of the other namespace: %d %s", r.Status, r.Body)
	}

	// ClickHouse takes the rows again: the repair pass applies them.
	refusing.Store(false)
	testenv.Eventually(t, 60*time.Second, "the repair pass to apply the recorded records", func() bool {
		return failures() == 0 && caughtUp(bad)
	})
	testenv.CheckProjection(t, pool, conn, p, org, bad)
	testenv.CheckProjection(t, pool, conn, p, org, good)
	if r := c.Search(t, bad, "refused fact number 3", 3); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"memory_key":"fact-03"`) {
		t.Fatalf("search of the repaired namespace: %d %s", r.Status, r.Body)
	}
	testenv.Eventually(t, 10*time.Second, "/metrics to count no failure", func() bool {
		m := metricsText(t, url)
		return strings.Contains(m, "\nloom_projection_held_namespaces 0\n") && strings.Contains(m, "\nloom_projection_failed_records 0\n")
	})
}
