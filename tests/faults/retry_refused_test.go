package faults

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/projector"
	"github.com/loomplane/loom/relay"
	"github.com/loomplane/loom/tests/testenv"
)

// A batch that ClickHouse refuses once is applied whole by its retry: nothing is
// recorded as a failure and the namespace ends equal to the journal. An attempt opens
// its records' sealed content in place, which spends it, so a retry must decode them
// afresh: one that applied the same envelopes again would find none of them opening
// and hold the namespace behind failures.
func TestABatchRefusedOnceIsAppliedWholeByItsRetry(t *testing.T) {
	p := projection(t)
	ns := testenv.Unique(t, "refused-once")
	var inserts atomic.Int32
	faults := projector.Faults{BeforeInsert: func(_, namespace string) error {
		if namespace == ns && inserts.Add(1) == 1 {
			return errors.New("injected: ClickHouse refuses the first insert of " + namespace)
		}
		return nil
	}}
	n, url := env.API(t, func(cfg *config.Config) { cfg.Pipeline.Projection = p })
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	// No repair pass: a record recorded as a failure stays one.
	env.FaultyProjector(t, p, faults, func(cfg *config.Config) { cfg.Projector.Attempts, cfg.Projector.RepairInterval = 3, 0 })
	env.Relay(t, relay.Faults{})
	pool, conn := env.PG(t), env.CH(t)
	for i := 0; i < 10; i++ {
		c.Set(t, ns, fmt.Sprintf("fact-%02d", i), fmt.Sprintf("a fact refused once, number %d", i))
	}
	failures := func() int64 {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.projection_failures WHERE projection = $1 AND org = $2 AND namespace = $3`, p, org, ns)
	}
	testenv.Eventually(t, 60*time.Second, "the namespace to be projected or held", func() bool {
		return testenv.Watermark(t, pool, p, org, ns) == testenv.Generation(t, pool, org, ns) || failures() > 0
	})
	if n := failures(); n != 0 {
		t.Fatalf("%d of the namespace's records were recorded as failures, want none", n)
	}
	if inserts.Load() < 2 {
		t.Fatalf("the fault saw %d inserts of the namespace, want the refused one and its retry", inserts.Load())
	}
	testenv.CheckProjection(t, pool, conn, p, org, ns)
}
