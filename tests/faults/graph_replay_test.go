package faults

import (
	"context"
	"fmt"
	"math/rand"
	"net/http"
	"strings"
	"testing"
	"time"

	typed "github.com/loomplane/loom/client"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/projector"
	"github.com/loomplane/loom/relay"
	"github.com/loomplane/loom/tests/testenv"
)

// graphTables are the tables the graph fold writes.
var graphTables = []string{"entities", "entity_triples", "entity_triple_rows", "entity_edges", "entity_edge_rows", "entity_sightings"}

// The graph is a pure fold over the topic. 5,000 random writes (revisions, same-key
// retirements, deletes, Undos, pins, high rows, dated and bounded facts) projected in
// small batches give tables that a reset to earliest leaves identical, and that a
// rebuild from empty graph tables in batches of another size gives again (the entity
// sightings too: a rebuild refills them).
func TestGraphReplaysIntoIdenticalTables(t *testing.T) {
	p1 := projection(t)
	// A topic of its own: a projection the later tests start replays the shared topic
	// from its start, and should not fold these 5,000 records first.
	topic := env.CreateTopic(t, nil)
	onTopic := func(c *config.Config) { c.Pipeline.Topic = topic }
	n, url, stopNode := env.Serve(t, []string{"api", "projector"}, func(c *config.Config) {
		c.Pipeline.Topic, c.Pipeline.Projection, c.Projector.BatchRows = topic, p1, 150
		c.Command.BulkConflictCheckMax = 10 // same-key retirements need no peer reads; keep the writes quick
	})
	admin := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	env.Relay(t, relay.Faults{}, onTopic)
	conn := env.CH(t)
	ns := testenv.Unique(t, "graph-replay")
	if _, err := admin.Typed(t).Configure(context.Background(), ns, typed.NamespaceConfig{ConflictPolicy: "newest_wins",
		Relations: map[string]string{"lives_in": "single", "works_at": "single", "visited": "multi", "knows": "multi"}}); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	pool := env.PG(t)
	caughtUp := func() {
		testenv.Eventually(t, time.Minute, "the projection to reach the generation", func() bool {
			return testenv.Watermark(t, pool, p1, org, ns) == testenv.Generation(t, pool, org, ns)
		})
	}
	writeRandomGraph(t, admin, ns, rand.New(rand.NewSource(10)), 5000, func() int64 {
		caughtUp()
		return testenv.Generation(t, pool, org, ns)
	})
	t.Logf("wrote %d revisions in %s", testenv.Generation(t, pool, org, ns), time.Since(start).Round(time.Millisecond))
	group := projector.Group(p1)
	caughtUp()
	testenv.Eventually(t, time.Minute, "the projection to commit its offsets", func() bool { return env.GroupCaughtUp(t, group, topic) })
	before := testenv.TableSums(t, conn, org, []string{ns})
	if strings.HasPrefix(before["entity_sightings"], "0 rows") {
		t.Fatalf("the fold wrote no entity sightings: %v", before)
	}
	var closed, restored, fallbacks uint64
	if err := conn.QueryRow(context.Background(), `SELECT countIf(isNotNull(invalid_at)), countIf(restored = 1), countIf(fallback = 1)
		FROM loom.entity_triples FINAL WHERE org = ? AND namespace = ?`, org, ns).Scan(&closed, &restored, &fallbacks); err != nil {
		t.Fatal(err)
	}
	t.Logf("tables %v; %d closed, %d restored and %d fallback fact versions", before, closed, restored, fallbacks)
	if closed == 0 || restored == 0 {
		t.Fatalf("the stream closed %d facts and restored %d: it does not exercise the rules", closed, restored)
	}

	// A reset to earliest folds every record again over the tables as they are.
	resetPath := "/v1/admin/projections/" + p1 + ":reset"
	operator := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Role: auth.RoleOperator}))
	if r := operator.Do(t, http.MethodPost, resetPath, []byte(`{"to": "earliest", "execute": true}`)); r.Status != http.StatusOK {
		t.Fatalf("reset: %d %s", r.Status, r.Body)
	}
	start = time.Now()
	testenv.Eventually(t, 2*time.Minute, "the replay to catch up", func() bool { return env.GroupCaughtUp(t, group, topic) })
	t.Logf("replayed in %s", time.Since(start).Round(time.Millisecond))
	if after := testenv.TableSums(t, conn, org, []string{ns}); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("tables changed over the replay:\n before %v\n after  %v", before, after)
	}

	// A new projection in batches of another size rebuilds the graph from empty tables.
	stopNode()
	deleteGraph(t, conn, ns)
	p2 := projection(t) + "_rebuild"
	start = time.Now()
	env.Projector(t, p2, onTopic, func(c *config.Config) { c.Projector.BatchRows = 1000 })
	testenv.Eventually(t, 2*time.Minute, "the rebuild to catch up", func() bool {
		return testenv.Watermark(t, pool, p2, org, ns) == testenv.Generation(t, pool, org, ns)
	})
	t.Logf("rebuilt in %s", time.Since(start).Round(time.Millisecond))
	if after := testenv.TableSums(t, conn, org, []string{ns}); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a rebuild in other batches folds other tables:\n before %v\n after  %v", before, after)
	}
}

// writeRandomGraph writes at least n random revisions into ns. Before each batch it
// waits for the projection (settled answers the namespace's generation), so the
// batch's verdicts do not contend with a projection far behind.
func writeRandomGraph(t *testing.T, c *testenv.Client, ns string, rng *rand.Rand, n int64, settled func() int64) {
	people := []string{"Ada", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hal"}
	places := []string{"London", "Paris", "Berlin", "Rome", "Oslo", "Lima", "Kyoto", "Cairo", "Quito", "Perth", "Acme", "Globex"}
	predicates := []string{"lives_in", "works_at", "visited", "knows"}
	key := func() string { return fmt.Sprintf("k%03d", rng.Intn(250)) }
	session := func() string { return fmt.Sprintf("s%d", rng.Intn(3)) }
	day := time.Now().UTC().Truncate(24 * time.Hour)
	entry := func(i int) typed.BulkEntry {
		var rels []typed.RelationInput
		stated := map[string]bool{}
		for j := 0; j < rng.Intn(4); j++ {
			p := predicates[rng.Intn(len(predicates))]
			obj := places[rng.Intn(len(places))]
			if p == "knows" {
				obj = people[rng.Intn(len(people))]
			}
			subject := people[rng.Intn(len(people))]
			if stated[subject+p+obj] {
				continue
			}
			stated[subject+p+obj] = true
			r := typed.RelationInput{Subject: subject, Predicate: p, Object: obj}
			if rng.Intn(4) == 0 {
				r.ValidFrom = day.AddDate(0, 0, rng.Intn(60)-30)
			}
			if rng.Intn(6) == 0 {
				r.ValidTo = day.AddDate(0, 0, 31+rng.Intn(60))
			}
			rels = append(rels, r)
		}
		e := typed.BulkEntry{Key: key(), Identity: typed.Identity{SessionID: session()}, Relations: rels,
			Value: fmt.Sprintf("note %d: %s and %s, revision %d", i, people[rng.Intn(len(people))], places[rng.Intn(len(places))], rng.Intn(1e6))}
		if rng.Intn(3) == 0 {
			e.Entities = []typed.Entity{{Name: people[rng.Intn(len(people))]}, {Name: places[rng.Intn(len(places))], Type: "place"}}
		}
		if rng.Intn(12) == 0 {
			e.Sensitivity = "high"
		}
		return e
	}
	ctx, tc := context.Background(), c.Typed(t)
	for batch := 0; settled() < n; batch++ {
		entries := make([]typed.BulkEntry, 250)
		for i := range entries {
			entries[i] = entry(batch*len(entries) + i)
		}
		if _, err := tc.BulkSet(ctx, ns, typed.BulkSetRequest{Entries: entries}); err != nil {
			t.Fatalf("bulk set: %v", err)
		}
		// Between batches: deletes, Undos of deletes and retirements, pins, whatever
		// they answer (a key may hold nothing to act on).
		for i := 0; i < 12; i++ {
			k, id := key(), typed.Identity{SessionID: session()}
			switch rng.Intn(3) {
			case 0:
				tc.Delete(ctx, ns, k, typed.Identity{SessionID: session()}, "")
			case 1:
				tc.Restore(ctx, ns, k, id)
			default:
				tc.Pin(ctx, ns, k, id)
			}
		}
	}
}

// deleteGraph removes a namespace's graph rows and waits for the mutations to land.
func deleteGraph(t *testing.T, conn *ch.Conn, ns string) {
	t.Helper()
	ctx := context.Background()
	for _, table := range graphTables {
		if err := conn.Exec(ctx, fmt.Sprintf("ALTER TABLE loom.%s DELETE WHERE org = ? AND namespace = ?", table), org, ns); err != nil {
			t.Fatalf("delete the graph of %s from %s: %v", ns, table, err)
		}
	}
	testenv.Eventually(t, time.Minute, "the graph's deletes to land", func() bool {
		var pending uint64
		if err := conn.QueryRow(ctx, `SELECT count() FROM system.mutations WHERE database = 'loom' AND is_done = 0`).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		return pending == 0
	})
	var left uint64
	if err := conn.QueryRow(ctx, `SELECT count() FROM loom.entity_triples WHERE org = ? AND namespace = ?`, org, ns).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d facts left after the delete (%v)", left, err)
	}
}
