package outbox

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/pgtest"
)

// A commit's records queued in one statement (QueueMany) are read back as the relay
// reads them: in the order queued, which is their seqs' order, each with its own key,
// headers and value, and a record queued without vectors stays a plain record (NULL
// vectors), not one queued by reference.
func TestRecordsQueuedTogetherKeepTheirOrderAndFields(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Migrated(t, postgres, "acme")
	var recs []Record
	for i := range 40 {
		rec := Record{Org: "acme", Namespace: "many", Seq: int64(100 + i), Topic: "loom.memory",
			Key: []byte(fmt.Sprintf("key-%d", i)), Headers: []byte(fmt.Sprintf(`[["ce_id", "r%d"]]`, i)),
			Value: []byte(fmt.Sprintf("value-%d", i))}
		if i%3 == 0 {
			rec.Vectors = []byte(fmt.Sprintf("vectors-%d", i))
		}
		recs = append(recs, rec)
	}
	b := &pgx.Batch{}
	QueueMany(b, recs)
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	pending, err := ReadPending(ctx, pool, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != len(recs) {
		t.Fatalf("read %d records, want %d", len(pending), len(recs))
	}
	for i, got := range pending {
		want := recs[i]
		if got.Seq != want.Seq {
			t.Fatalf("record %d read is seq %d, want %d: the relay would publish out of seq order", i, got.Seq, want.Seq)
		}
		if !bytes.Equal(got.Key, want.Key) || !bytes.Equal(got.Value, want.Value) || got.Topic != want.Topic {
			t.Errorf("seq %d: key %q value %q topic %q, want %q %q %q", got.Seq, got.Key, got.Value, got.Topic, want.Key, want.Value, want.Topic)
		}
		if want.Vectors == nil && got.Vectors != nil {
			t.Errorf("seq %d was queued without vectors and reads %q: a plain record read as one queued by reference", got.Seq, got.Vectors)
		}
		if want.Vectors != nil && !bytes.Equal(got.Vectors, want.Vectors) {
			t.Errorf("seq %d: vectors %q, want %q", got.Seq, got.Vectors, want.Vectors)
		}
		if !bytes.Contains(got.Headers, []byte(fmt.Sprintf(`"r%d"`, i))) {
			t.Errorf("seq %d: headers %s, want its own", got.Seq, got.Headers)
		}
	}
}
