package faults

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	typed "github.com/loomplane/loom/client"

	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/relay"
	"github.com/loomplane/loom/tests/testenv"
)

// `loomd republish` re-creates a namespace's records from the Postgres journal onto a
// topic that lost them: the same ids, types and plain fields as the originals, content
// a projection can open (it ends equal to the journal), in seq order even with records
// of the namespace still waiting in the outbox. Republishing again only adds copies.
func TestRepublishRecreatesALostTopicFromTheJournal(t *testing.T) {
	p := projection(t)
	c := client(t, func(cfg *config.Config) { cfg.Pipeline.Projection = p })
	pool, conn := env.PG(t), env.CH(t)
	ns := testenv.Unique(t, "republish")
	for i := 0; i < 12; i++ {
		c.Set(t, ns, fmt.Sprintf("k%d", i%5), fmt.Sprintf("journal fact %d", i))
	}
	stopRelay, _ := env.Relay(t, relay.Faults{})
	outbox := func() int64 {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.outbox WHERE org = $1 AND namespace = $2`, org, ns)
	}
	testenv.Eventually(t, 30*time.Second, "the relay to publish", func() bool { return outbox() == 0 })
	stopRelay()
	for i := 12; i < 15; i++ {
		c.Set(t, ns, fmt.Sprintf("k%d", i%5), fmt.Sprintf("journal fact %d", i))
	}

	lost := env.CreateTopic(t, nil)
	bin := buildLoomd(t)
	out, err := loomd(bin, "republish", "--from-seq", "1", "--namespace", ns, "--topic", lost)
	if err != nil || !strings.Contains(out, "queued 18 records of 1 namespaces") {
		t.Fatalf("loomd republish: %v\n%s", err, out)
	}
	// The relay publishes by outbox id: each topic's rows of the namespace are in seq order.
	rows, err := pool.Query(context.Background(), `SELECT topic, seq FROM loom.outbox WHERE org = $1 AND namespace = $2 ORDER BY id`, org, ns)
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]int64{}
	for rows.Next() {
		var topic string
		var seq int64
		if err := rows.Scan(&topic, &seq); err != nil {
			t.Fatal(err)
		}
		if seq != last[topic]+1 && !(last[topic] == 0 && seq == 13) {
			t.Fatalf("outbox holds seq %d of %s after seq %d", seq, topic, last[topic])
		}
		last[topic] = seq
	}
	rows.Close()
	if last[lost] != 15 || last[env.Config(nil).Pipeline.Topic] != 15 {
		t.Fatalf("outbox ends at %v", last)
	}

	env.Relay(t, relay.Faults{})
	testenv.Eventually(t, 30*time.Second, "the relay to publish the republished records", func() bool { return outbox() == 0 })
	originals := testenv.Stream(t, env.TopicRecords(t), org, ns, 15)
	copies := testenv.Stream(t, env.Records(t, lost), org, ns, 15)
	for i := range originals {
		o, c := originals[i], copies[i]
		if o.ID != c.ID || o.Type != c.Type || !o.CommittedAt.Equal(c.CommittedAt) || !reflect.DeepEqual(o.Revision, c.Revision) {
			t.Fatalf("republished %s differs from the original:\n %+v %+v\n %+v %+v", o.ID, o.Revision, o, c.Revision, c)
		}
	}

	env.Projector(t, p, func(cfg *config.Config) { cfg.Pipeline.Topic = lost })
	testenv.Eventually(t, 30*time.Second, "a projection of the republished topic to catch up", func() bool {
		return testenv.Watermark(t, pool, p, org, ns) == 15
	})
	testenv.CheckProjection(t, pool, conn, p, org, ns)
	if found, err := c.Typed(t).Search(context.Background(), ns, typed.SearchRequest{Query: "journal fact 14", TopK: 1}); err != nil || len(found.Hits) != 1 {
		t.Fatalf("search over the republished projection: %v %+v", err, found)
	}

	if out, err := loomd(bin, "republish", "--from-seq", "14", "--namespace", ns, "--topic", lost); err != nil || !strings.Contains(out, "queued 2 records") {
		t.Fatalf("loomd republish again: %v\n%s", err, out)
	}
	testenv.Eventually(t, 30*time.Second, "the relay to publish the copies", func() bool { return outbox() == 0 })
	testenv.Stream(t, env.Records(t, lost), org, ns, 15)
	if out, err := loomd(bin, "republish", "--namespace", ns); err == nil || !strings.Contains(out, "--from-seq") {
		t.Fatalf("loomd republish without --from-seq: %v\n%s", err, out)
	}
}
