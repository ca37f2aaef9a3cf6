package faults

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	typed "github.com/loomplane/loom/client"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/relay"
	"github.com/loomplane/loom/tests/testenv"
)

// A revision's outbox row references its journal row, and the relay seals the record's
// content from it as it publishes (internal/outbox.Complete). A version redacted while
// its record still waits goes out all the same, taking its seq, and opens to nothing;
// the record of a version that was not redacted opens to its text; the projection
// serves the one and not the other.
func TestARecordRedactedBeforeItIsPublishedTakesItsSeqAndOpensToNothing(t *testing.T) {
	p := projection(t)
	env.Projector(t, p)
	_, c, org := env.OrgAPI(t, func(c *config.Config) { c.Pipeline.Projection = p })
	pool := env.PG(t)
	ns := testenv.Unique(t, "unpublished")
	ctx, tc := context.Background(), c.Typed(t)
	secret := fmt.Sprintf("sword%06d", time.Now().UnixNano()%1_000_000)
	first, err := tc.Set(ctx, ns, "vault", typed.SetRequest{Value: "the vault code is " + secret})
	if err != nil {
		t.Fatalf("set: %v", err)
	}
	if _, err := tc.Delete(ctx, ns, "vault", typed.Identity{}, ""); err != nil {
		t.Fatalf("delete: %v", err)
	}
	kept := fmt.Sprintf("the garden gate is painted gword%06d", time.Now().UnixNano()%1_000_000)
	if _, err := tc.Set(ctx, ns, "gate", typed.SetRequest{Value: kept}); err != nil {
		t.Fatalf("set: %v", err)
	}
	if _, err := tc.Redact(ctx, ns, "vault", typed.RedactRequest{Version: first.VersionText}); err != nil {
		t.Fatalf("redact: %v", err)
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.outbox WHERE org = $1 AND namespace = $2`, org, ns); n != 4 {
		t.Fatalf("the outbox holds %d records, want the two versions of vault, gate's and the redaction's", n)
	}

	env.Relay(t, relay.Faults{})
	testenv.Eventually(t, 60*time.Second, "the relay to publish the namespace", func() bool {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.outbox WHERE org = $1 AND namespace = $2`, org, ns) == 0
	})
	var seqs []int64
	opened := map[int64]*events.Content{}
	for _, rec := range env.NamespaceRecords(t, org, ns) {
		seqs = append(seqs, rec.Seq)
		e, err := events.Decode(rec.Record.Value)
		if err != nil {
			t.Fatal(err)
		}
		if e.Revision == nil {
			continue
		}
		var key []byte
		err = pool.QueryRow(ctx, `SELECT loom.unwrapped_key(data_key) FROM loom.revision_keys WHERE org = $1 AND namespace = $2 AND seq = $3`,
			org, ns, e.Seq).Scan(&key)
		if err == pgx.ErrNoRows {
			continue // destroyed by the redaction
		}
		if err != nil {
			t.Fatal(err)
		}
		if opened[e.Seq], err = events.Open(key, e.ID, e.Sealed); err != nil {
			t.Fatalf("the record of seq %d does not open under its key: %v", e.Seq, err)
		}
	}
	if fmt.Sprint(seqs) != "[1 2 3 4]" {
		t.Fatalf("the topic holds seqs %v, want 1 to 4", seqs)
	}
	if len(opened) != 1 || opened[3] == nil || !bytes.Contains(opened[3].Value, []byte(kept)) || opened[3].MemoryKey != "gate" {
		t.Fatalf("the records that open are %+v, want gate's alone, with its text", opened)
	}
	testenv.Eventually(t, 60*time.Second, "the projection to serve gate", func() bool { return searchFinds(t, c, ns, kept, 3, kept) })
	if searchFinds(t, c, ns, "the vault code is "+secret, 5, secret) {
		t.Fatalf("search serves the text redacted before its record was published")
	}
}
