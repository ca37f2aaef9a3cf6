package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	typed "github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/relay"
	"github.com/loomplane/loom/tests/testenv"
)

// A projection that starts far behind takes its records in batches of
// LOOM_PROJECTOR_REPLAY_BATCH_ROWS, and a batch of 7,000 rows of one namespace applies:
// the read of its rows' graph links is split into statements ClickHouse accepts. One
// statement naming every row id was refused ("Max query size exceeded") at every
// attempt, and the batch's records were recorded as failures.
func TestAProjectionFarBehindCatchesUpInLargeBatches(t *testing.T) {
	topic := env.CreateTopic(t, nil)
	onTopic := func(c *config.Config) { c.Pipeline.Topic = topic }
	n, url, _ := env.Serve(t, []string{"api"}, onTopic)
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	ns := testenv.Unique(t, "far-behind")
	c.AppendOnly(t, ns)
	const rows = 7000
	tc := c.Typed(t)
	for b := 0; b < rows/250; b++ {
		entries := make([]typed.BulkEntry, 250)
		for i := range entries {
			entries[i] = typed.BulkEntry{Key: fmt.Sprintf("k%05d", b*250+i), Value: fmt.Sprintf("fact number %d", b*250+i)}
		}
		// A loaded machine answers a retryable 503 now and then; a retry of a call that did
		// commit adds rows, which changes nothing here.
		testenv.Eventually(t, time.Minute, "a bulk set to be taken", func() bool {
			_, err := tc.BulkSet(context.Background(), ns, typed.BulkSetRequest{Entries: entries})
			return err == nil
		})
	}
	env.Relay(t, relay.Faults{}, onTopic)
	testenv.Eventually(t, 2*time.Minute, "the relay to publish every row", func() bool { return len(env.Records(t, topic)) >= rows })

	p := projection(t)
	pool := env.PG(t)
	env.Projector(t, p, onTopic, func(c *config.Config) { c.Projector.BatchRows, c.Projector.ReplayBatchRows = 1000, 10000 })
	testenv.Eventually(t, 3*time.Minute, "the projection to catch up", func() bool {
		return testenv.Watermark(t, pool, p, org, ns) == testenv.Generation(t, pool, org, ns)
	})
	var failed int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM loom.projection_failures WHERE projection = $1`, p).Scan(&failed); err != nil {
		t.Fatal(err)
	}
	if failed > 0 {
		t.Fatalf("the projection recorded %d failures", failed)
	}
}
