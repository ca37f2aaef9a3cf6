package faults

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	typed "github.com/loomplane/loom/client"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/relay"
	"github.com/loomplane/loom/tests/testenv"
)

const org = "acme"

func projection(t testing.TB) string {
	return strings.ReplaceAll(testenv.Unique(t, "p"), "-", "_")
}

func client(t *testing.T, mod func(*config.Config)) *testenv.Client {
	n, url := env.API(t, mod)
	return testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
}

// A relay that dies after Kafka acknowledged its records and before it deleted them
// publishes them again when a relay runs next. Consumers see every record twice; the
// projection ends exactly where it would have without the fault.
func TestRelayCrashBetweenProduceAndDelete(t *testing.T) {
	p := projection(t)
	c := client(t, func(cfg *config.Config) { cfg.Pipeline.Projection = p })
	pool, conn := env.PG(t), env.CH(t)
	ns, control := testenv.Unique(t, "faulty"), testenv.Unique(t, "control")
	c.AppendOnly(t, ns, control)
	for i := 0; i < 20; i++ {
		c.Set(t, ns, fmt.Sprintf("fact-%02d", i), fmt.Sprintf("fact number %d about the faulty relay", i))
		c.Set(t, control, fmt.Sprintf("fact-%02d", i), fmt.Sprintf("fact number %d about the faulty relay", i))
	}
	outbox := func() int64 {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.outbox WHERE org = $1 AND namespace = ANY($2)`, org, []string{ns, control})
	}
	if n := outbox(); n != 40 {
		t.Fatalf("outbox holds %d records before any relay ran, want 40", n)
	}

	var acked []int64
	_, done := env.Relay(t, relay.Faults{AfterProduce: func(ids []int64) error {
		acked = append(acked, ids...)
		return errors.New("killed after produce, before delete")
	}})
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "killed after produce") {
			t.Fatalf("faulty relay ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("faulty relay never reached its fault")
	}
	// The outbox is the deployment's: a record another test left unpublished is acked
	// with these; what matters is that every one of these 40 was, and stayed.
	ours := 0
	for _, id := range acked {
		if testenv.Int(t, pool, `SELECT count(*) FROM loom.outbox WHERE id = $1 AND org = $2 AND namespace = ANY($3)`, id, org, []string{ns, control}) == 1 {
			ours++
		}
	}
	if ours != 40 || outbox() != 40 {
		t.Fatalf("faulty relay: %d of these namespaces' records acknowledged (%d in all), %d left in the outbox; want 40 and 40", ours, len(acked), outbox())
	}

	env.Relay(t, relay.Faults{})
	testenv.Eventually(t, 30*time.Second, "the relay to drain the outbox", func() bool { return outbox() == 0 })
	for seq, n := range env.SeqCopies(t, org, ns) {
		if n != 2 {
			t.Fatalf("seq %d of the faulty namespace is on the topic %d times, want 2", seq, n)
		}
	}

	env.Projector(t, p)
	for _, space := range []string{ns, control} {
		if r := c.Search(t, space, "fact number 7 about the faulty relay", 3); r.Status != http.StatusOK {
			t.Fatalf("search %s: %d %s", space, r.Status, r.Body)
		}
		testenv.CheckProjection(t, pool, conn, p, org, space)
	}
}

// A projector stopped while writes keep arriving, then started again, loses nothing
// and doubles nothing.
func TestProjectorStoppedMidStreamResumes(t *testing.T) {
	p := projection(t)
	c := client(t, func(cfg *config.Config) { cfg.Pipeline.Projection = p })
	pool, conn := env.PG(t), env.CH(t)
	ns := testenv.Unique(t, "stream")
	c.AppendOnly(t, ns)
	env.Relay(t, relay.Faults{})
	stop := env.Projector(t, p)

	write := func(from, to int) {
		for i := from; i < to; i++ {
			c.Set(t, ns, fmt.Sprintf("k%02d", i%40), fmt.Sprintf("streamed value %d", i))
		}
	}
	write(0, 20)
	testenv.Eventually(t, 30*time.Second, "the projector to apply part of the stream", func() bool {
		return testenv.Watermark(t, pool, p, org, ns) >= 10
	})
	stop()
	write(20, 60)
	if wm, gen := testenv.Watermark(t, pool, p, org, ns), testenv.Generation(t, pool, org, ns); wm >= gen {
		t.Fatalf("the stopped projector is at %d of %d: not behind", wm, gen)
	}

	env.Projector(t, p)
	if r := c.Search(t, ns, "streamed value", 5); r.Status != http.StatusOK {
		t.Fatalf("search after restart: %d %s", r.Status, r.Body)
	}
	testenv.CheckProjection(t, pool, conn, p, org, ns)
}

// With the projector stopped, a search cannot cover the last write: it answers a
// retryable 503 PROJECTION_BEHIND once the configured wait is spent, and succeeds once
// the projector is back.
func TestSearchWhileProjectorStoppedIsProjectionBehind(t *testing.T) {
	p := projection(t)
	const wait = 700 * time.Millisecond
	c := client(t, func(cfg *config.Config) { cfg.Pipeline.Projection = p; cfg.Query.ProjectionWait = wait })
	ns := testenv.Unique(t, "behind")
	env.Relay(t, relay.Faults{})
	c.Set(t, ns, "k", "a fact the projector has not seen")

	ctx, tc := context.Background(), c.Typed(t)
	search := typed.SearchRequest{Query: "a fact", TopK: 3}
	start := time.Now()
	_, err := tc.Search(ctx, ns, search)
	waited := time.Since(start)
	e, _ := typed.AsError(err)
	if e == nil || e.Status != http.StatusServiceUnavailable || e.Code != typed.CodeProjectionBehind {
		t.Fatalf("search with the projector stopped: %v", err)
	}
	if !e.Retryable || e.Namespace != ns || e.Generation != 1 {
		t.Fatalf("PROJECTION_BEHIND envelope: %+v", e)
	}
	if waited < wait {
		t.Fatalf("answered after %s, before the configured wait of %s", waited, wait)
	}
	// A point read and history answer from Postgres and do not wait.
	if _, err := tc.Get(ctx, ns, "k", typed.Identity{}, time.Time{}); err != nil {
		t.Fatalf("get with the projector stopped: %v", err)
	}
	if h, err := tc.History(ctx, ns, "k", typed.Identity{}); err != nil || len(h.Versions) != 1 {
		t.Fatalf("history with the projector stopped: %v %+v", err, h)
	}

	env.Projector(t, p)
	// The new projection first reads the topic from the start; on a loaded machine that
	// can take longer than one search's wait.
	var found *typed.SearchAnswer
	testenv.Eventually(t, 30*time.Second, "the projector to catch up", func() bool {
		found, err = tc.Search(ctx, ns, search)
		return !typed.IsCode(err, typed.CodeProjectionBehind)
	})
	if err != nil || len(found.Hits) != 1 {
		t.Fatalf("search once the projector is back: %v %+v", err, found)
	}
}

// A search document whose key's head has moved on is never served: the hit is dropped
// and counted in stale_dropped.
func TestStaleHitIsDroppedAndCounted(t *testing.T) {
	p := projection(t)
	c := client(t, func(cfg *config.Config) { cfg.Pipeline.Projection = p })
	pool := env.PG(t)
	ns := testenv.Unique(t, "stale")
	env.Relay(t, relay.Faults{})
	stop := env.Projector(t, p)
	c.Set(t, ns, "city", "the user lives in Lisbon")
	c.Set(t, ns, "pet", "the user has a cat named Lisbon")
	ctx, tc := context.Background(), c.Typed(t)
	if found, err := tc.Search(ctx, ns, typed.SearchRequest{Query: "lives in Lisbon", TopK: 5}); err != nil || len(found.Hits) != 2 {
		t.Fatalf("search before the revision: %v %+v", err, found)
	}
	stop()
	c.Set(t, ns, "city", "the user moved to Oslo")
	// Pretend the projection caught up while ClickHouse still holds the old document:
	// what a search meets when a write commits between its barrier and its validation.
	if _, err := pool.Exec(context.Background(), `UPDATE loom.projection_watermarks SET seq = $4
		WHERE projection = $1 AND org = $2 AND namespace = $3`, p, org, ns, testenv.Generation(t, pool, org, ns)); err != nil {
		t.Fatal(err)
	}
	found, err := tc.Search(ctx, ns, typed.SearchRequest{Query: "lives in Lisbon", TopK: 1})
	if err != nil {
		t.Fatalf("search: %v", err)
	}
	if found.StaleDropped != 1 {
		t.Fatalf("stale_dropped = %d, want 1: %+v", found.StaleDropped, found)
	}
	if len(found.Hits) != 1 || found.Hits[0].MemoryKey != "pet" {
		t.Fatalf("the stale hit was served or not refilled: %+v", found.Hits)
	}
}
