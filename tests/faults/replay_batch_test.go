package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	typed "github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/projector"
	"github.com/loomplane/loom/relay"
	"github.com/loomplane/loom/tests/testenv"
)

// A projection that starts far behind takes its records in batches of
// LOOM_PROJECTOR_REPLAY_BATCH_ROWS, and a batch of 7,000 rows of one namespace applies:
// the read of its rows' graph links is split into statements ClickHouse accepts. One
// statement naming every row id was refused ("Max query size exceeded") at every
// attempt, and the batch's records were recorded as failures.
func TestAProjectionFarBehindCatchesUpInLargeBatches(t *testing.T) {
	c, ns, topic := unprojected(t, "far-behind")
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
	projectAfterTheRelay(t, topic, ns, rows, 3*time.Minute, func(c *config.Config) { c.Projector.BatchRows, c.Projector.ReplayBatchRows = 1000, 10000 })
}

// A projection far behind polls its next batch while it writes the one in hand
// (projector/ahead.go): every revision lands once, each key's latest version is its
// head, and the group commits the topic's end. 600 revisions of 200 keys in batches of
// 100: six batches, every other one polled while the one before it was written.
func TestAProjectionPollingAheadProjectsEveryRecordOnce(t *testing.T) {
	c, ns, topic := unprojected(t, "ahead")
	const keys, rounds = 200, 3
	tc := c.Typed(t)
	for r := 0; r < rounds; r++ {
		entries := make([]typed.BulkEntry, keys)
		for i := range entries {
			entries[i] = typed.BulkEntry{Key: fmt.Sprintf("k%03d", i), Value: fmt.Sprintf("fact %d, round %d", i, r)}
		}
		testenv.Eventually(t, time.Minute, "a bulk set to be taken", func() bool {
			_, err := tc.BulkSet(context.Background(), ns, typed.BulkSetRequest{Entries: entries})
			return err == nil
		})
	}
	p := projectAfterTheRelay(t, topic, ns, keys*rounds, 2*time.Minute, func(c *config.Config) {
		c.Projector.BatchRows, c.Projector.ReplayBatchRows = 100, 100
	})
	testenv.CheckProjection(t, env.PG(t), env.CH(t), p, org, ns)
	testenv.Eventually(t, 30*time.Second, "the projection to commit the topic's end", func() bool {
		return env.GroupCaughtUp(t, projector.Group(p), topic)
	})
}

// A batch whose rows name many long entities applies: the reads of the graph state it
// folds over (the entity pairs and relations its rows name) are split into statements
// ClickHouse accepts. A row of 32 entities of 200 bytes names 496 pairs, about 200 kB
// of keys; one statement naming every pair of a batch was refused ("Max query size
// exceeded") at every attempt and the batch's records were recorded as failures.
func TestABatchNamingManyLongEntitiesApplies(t *testing.T) {
	c, ns, topic := unprojected(t, "long-entities")
	const rows = 12
	entries := make([]typed.BulkEntry, rows)
	for i := range entries {
		entities := make([]typed.Entity, 32)
		for e := range entities {
			entities[e] = typed.Entity{Name: fmt.Sprintf("entity %02d of row %02d %s", e, i, strings.Repeat("x", 180))}
		}
		relations := make([]typed.RelationInput, 8)
		for r := range relations {
			relations[r] = typed.RelationInput{Subject: entities[r].Name, Predicate: fmt.Sprintf("relates to %d", r), Object: entities[r+8].Name}
		}
		entries[i] = typed.BulkEntry{Key: fmt.Sprintf("k%02d", i), Value: fmt.Sprintf("fact number %d", i), Entities: entities, Relations: relations}
	}
	if _, err := c.Typed(t).BulkSet(context.Background(), ns, typed.BulkSetRequest{Entries: entries}); err != nil {
		t.Fatal(err)
	}
	projectAfterTheRelay(t, topic, ns, rows, time.Minute)
}

// unprojected serves the API alone on a fresh topic (no relay, no projector yet) and
// makes an append-only namespace named after prefix.
func unprojected(t *testing.T, prefix string) (c *testenv.Client, ns, topic string) {
	topic = env.CreateTopic(t, nil)
	n, url, _ := env.Serve(t, []string{"api"}, func(c *config.Config) { c.Pipeline.Topic = topic })
	c = testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	ns = testenv.Unique(t, prefix)
	c.AppendOnly(t, ns)
	return c, ns, topic
}

// projectAfterTheRelay publishes topic's rows, then starts a fresh projection on it
// (mods adjust its config), waits for it to reach ns's generation and
// fails the test if it recorded a record it could not apply. It returns the projection.
func projectAfterTheRelay(t *testing.T, topic, ns string, rows int, wait time.Duration, mods ...func(*config.Config)) string {
	t.Helper()
	onTopic := func(c *config.Config) { c.Pipeline.Topic = topic }
	env.Relay(t, relay.Faults{}, onTopic)
	testenv.Eventually(t, 2*time.Minute, "the relay to publish every row", func() bool { return len(env.Records(t, topic)) >= rows })
	p := projection(t)
	env.Projector(t, p, append([]func(*config.Config){onTopic}, mods...)...)
	pool := env.PG(t)
	testenv.Eventually(t, wait, "the projection to catch up", func() bool {
		return testenv.Watermark(t, pool, p, org, ns) == testenv.Generation(t, pool, org, ns)
	})
	var failed int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM loom.projection_failures WHERE projection = $1`, p).Scan(&failed); err != nil {
		t.Fatal(err)
	}
	if failed > 0 {
		t.Fatalf("the projection recorded %d failures", failed)
	}
	return p
}
