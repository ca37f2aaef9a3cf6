package faults

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	typed "github.com/loomplane/loom/client"

	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/relay"
	"github.com/loomplane/loom/tests/testenv"
)

// A bulk write's audit note rides on its last record; `loomd republish` re-creates it
// from the journal's audit, so a projection of the republished topic writes the same
// batch row.
func TestRepublishCarriesABulkWritesAuditNote(t *testing.T) {
	p := projection(t)
	c := client(t, func(cfg *config.Config) { cfg.Pipeline.Projection = p })
	pool := env.PG(t)
	ns := testenv.Unique(t, "republish-note")
	if _, err := c.Typed(t).BulkSet(context.Background(), ns, typed.BulkSetRequest{Entries: []typed.BulkEntry{
		{Key: "a", Value: "the release train leaves on Thursdays"},
		{Key: "b", Value: "the on-call rotation changes on Mondays"},
	}}); err != nil {
		t.Fatal(err)
	}
	outbox := func() int64 {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.outbox WHERE org = $1 AND namespace = $2`, org, ns)
	}
	env.Relay(t, relay.Faults{})
	testenv.Eventually(t, 30*time.Second, "the relay to publish", func() bool { return outbox() == 0 })

	lost := env.CreateTopic(t, nil)
	if out, err := loomd(buildLoomd(t), "republish", "--from-seq", "1", "--namespace", ns, "--topic", lost); err != nil ||
		!strings.Contains(out, "queued 2 records") {
		t.Fatalf("loomd republish: %v\n%s", err, out)
	}
	testenv.Eventually(t, 30*time.Second, "the relay to publish the republished records", func() bool { return outbox() == 0 })
	originals := testenv.Stream(t, env.TopicRecords(t), org, ns, 2)
	copies := testenv.Stream(t, env.Records(t, lost), org, ns, 2)
	if originals[0].Audit != nil || originals[1].Audit == nil || len(originals[1].Audit.Members) != 2 ||
		!reflect.DeepEqual(originals[1].Audit, copies[1].Audit) || copies[0].Audit != nil {
		t.Fatalf("the batch's note: original %+v, republished %+v; want it on the last record, the same", originals[1].Audit, copies[1].Audit)
	}
}
