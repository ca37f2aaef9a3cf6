package faults

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	typed "github.com/loomplane/loom/client"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/projector"
	"github.com/loomplane/loom/relay"
	"github.com/loomplane/loom/tests/testenv"
)

// A record Kafka refuses (here: larger than the topic's max.message.bytes) is retried
// alone and parked after LOOM_OUTBOX_MAX_ATTEMPTS refusals. A loom.parked placeholder
// takes its seq, so the namespace stays gapless and searchable; the records around it,
// and another namespace's records caught in the same refused batch, are published.
func TestRefusedRecordIsParkedAndTheStreamStaysGapless(t *testing.T) {
	p := projection(t)
	topic := env.CreateTopic(t, map[string]string{"max.message.bytes": "8000"})
	onTopic := func(c *config.Config) { c.Pipeline.Topic = topic; c.Pipeline.Projection = p; c.Relay.MaxAttempts = 3 }
	n, url := env.API(t, onTopic)
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	pool := env.PG(t)
	ns, other := testenv.Unique(t, "parked"), testenv.Unique(t, "neighbour")
	c.AppendOnly(t, ns, other)

	c.Set(t, ns, "small-1", "a small fact before the large one")
	c.Set(t, other, "n-1", "a neighbour's fact")
	c.Set(t, ns, "large", strings.Repeat("a large value that no broker of this topic accepts ", 200))
	c.Set(t, other, "n-2", "another neighbour's fact")
	c.Set(t, ns, "small-3", "a small fact after the large one")

	env.Relay(t, relay.Faults{}, onTopic)
	pending := func() int64 {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.outbox WHERE org = $1 AND namespace = ANY($2) AND parked_at IS NULL`,
			org, []string{ns, other})
	}
	testenv.Eventually(t, 30*time.Second, "the relay to publish or park every record", func() bool { return pending() == 0 })

	var attempts int64
	var lastError string
	if err := pool.QueryRow(context.Background(), `SELECT attempts, last_error FROM loom.outbox
		WHERE org = $1 AND namespace = $2 AND seq = 2 AND parked_at IS NOT NULL`, org, ns).Scan(&attempts, &lastError); err != nil {
		t.Fatalf("the large record is not parked: %v", err)
	}
	if attempts != 3 || !strings.Contains(lastError, "MESSAGE_TOO_LARGE") {
		t.Fatalf("parked after %d attempts with %q; want 3 and MESSAGE_TOO_LARGE", attempts, lastError)
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.outbox WHERE org = $1 AND namespace = ANY($2)`, org, []string{ns, other}); n != 1 {
		t.Fatalf("%d outbox rows left, want only the parked one", n)
	}

	records := env.Records(t, topic)
	stream := testenv.Stream(t, records, org, ns, 3)
	if stream[0].Type != events.TypeWritten || stream[1].Type != events.TypeParked || stream[2].Type != events.TypeWritten {
		t.Fatalf("stream types %s %s %s; want memory.written loom.parked memory.written", stream[0].Type, stream[1].Type, stream[2].Type)
	}
	if stream[1].Revision != nil || stream[1].Sealed != nil || stream[1].CommittedAt.IsZero() {
		t.Fatalf("the placeholder carries more than its seq and commit time: %+v", stream[1])
	}
	for _, e := range testenv.Stream(t, records, org, other, 2) {
		if e.Type == events.TypeParked {
			t.Fatalf("a neighbour's record %s was parked", e.ID)
		}
	}

	// Operators see it: health and metrics count the parked row.
	if h := postgresHealth(t, c); h.ParkedDeliveries < 1 {
		t.Fatalf("health counts %d parked deliveries", h.ParkedDeliveries)
	}
	if m := metricsText(t, url); !strings.Contains(m, "\nloom_outbox_parked ") || strings.Contains(m, "\nloom_outbox_parked 0\n") {
		t.Fatalf("/metrics does not count the parked record:\n%s", m)
	}

	// The projection steps over the placeholder: the namespace is searchable.
	env.Projector(t, p, onTopic)
	found, err := c.Typed(t).Search(context.Background(), ns, typed.SearchRequest{Query: "a small fact", TopK: 5})
	if err != nil {
		t.Fatalf("search over a parked seq: %v", err)
	}
	if wm := testenv.Watermark(t, pool, p, org, ns); wm != 3 {
		t.Fatalf("watermark %d over a parked seq, want 3", wm)
	}
	if len(found.Hits) != 2 {
		t.Fatalf("search hits %+v; want the two published facts", found.Hits)
	}
}

// With Kafka down, writes still commit and the outbox grows; a search cannot be
// covered and answers 503 PROJECTION_BEHIND. When Kafka is back the relay drains the
// outbox in order and the projection catches up exactly.
func TestKafkaDownWritesCommitAndTheRelayDrainsInOrder(t *testing.T) {
	p := projection(t)
	c := client(t, func(cfg *config.Config) {
		cfg.Pipeline.Projection = p
		cfg.Query.ProjectionWait = 500 * time.Millisecond
	})
	pool, conn := env.PG(t), env.CH(t)
	spaces := []string{testenv.Unique(t, "outage-a"), testenv.Unique(t, "outage-b")}
	c.AppendOnly(t, spaces...)
	env.Relay(t, relay.Faults{})
	env.Projector(t, p)
	for _, ns := range spaces {
		c.Set(t, ns, "before", "written before Kafka went away")
	}
	// A new projection reads the whole topic first: give it the time it needs.
	testenv.Eventually(t, 30*time.Second, "the projection to catch up before the outage", func() bool {
		return c.Search(t, spaces[0], "before Kafka", 1).Status == http.StatusOK
	})

	testenv.Eventually(t, 30*time.Second, "the projection to read the whole topic", func() bool {
		return env.GroupCaughtUp(t, projector.Group(p), env.Config(nil).Pipeline.Topic)
	})
	behindBefore := seqsBehind(t, c)

	env.Stack.Kafka.Stop()
	t.Cleanup(func() { env.Stack.Kafka.Restart(context.Background()) })
	for i := 0; i < 15; i++ {
		for _, ns := range spaces {
			c.Set(t, ns, fmt.Sprintf("k%02d", i%7), fmt.Sprintf("written while Kafka is down, number %d", i))
		}
	}
	if h := postgresHealth(t, c); h.OutboxDepth < 30 {
		t.Fatalf("outbox depth %d during the outage, want at least the 30 writes", h.OutboxDepth)
	}
	_, err := c.Typed(t).Search(context.Background(), spaces[0], typed.SearchRequest{Query: "while Kafka is down", TopK: 3})
	if e, _ := typed.AsError(err); e == nil || e.Status != http.StatusServiceUnavailable || e.Code != typed.CodeProjectionBehind {
		t.Fatalf("search during the outage: %v", err)
	}
	if behind := seqsBehind(t, c); behind != behindBefore+30 {
		t.Fatalf("health says the projection is %d seqs behind during the outage, %d before; want 30 more", behind, behindBefore)
	}

	if err := env.Stack.Kafka.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the relay to drain the outbox", func() bool {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.outbox WHERE org = $1 AND namespace = ANY($2)`, org, spaces) == 0
	})
	records := env.TopicRecords(t)
	for _, ns := range spaces {
		testenv.Stream(t, records, org, ns, 16)
		testenv.Eventually(t, 30*time.Second, "the projection to catch up after the outage", func() bool {
			return c.Search(t, ns, "while Kafka is down", 3).Status == http.StatusOK
		})
		testenv.CheckProjection(t, pool, conn, p, org, ns)
	}
	if behind := seqsBehind(t, c); behind != behindBefore {
		t.Fatalf("health says the projection is %d seqs behind after the outage, %d before", behind, behindBefore)
	}
}

// seqsBehind is how many seqs the serving projection lacks, per /v1/health?include=lag.
func seqsBehind(t *testing.T, c *testenv.Client) int64 {
	t.Helper()
	h, err := env.Operator(t, c.URL).Typed(t).Health(context.Background(), "lag")
	if err != nil || h.Lag == nil || h.Lag.Error != "" {
		t.Fatalf("health without lag: %v %+v", err, h)
	}
	return h.Lag.SeqsBehind
}

// postgresHealth is /v1/health?include=postgres's postgres object.
func postgresHealth(t *testing.T, c *testenv.Client) *typed.HealthPostgres {
	t.Helper()
	h, err := env.Operator(t, c.URL).Typed(t).Health(context.Background(), "postgres")
	if err != nil || h.Postgres == nil || h.Postgres.Error != "" {
		t.Fatalf("health without postgres: %v %+v", err, h)
	}
	return h.Postgres
}

func metricsText(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return "\n" + string(b)
}
