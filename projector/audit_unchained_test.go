package projector

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/tableset"
)

// With the chain off (`loomd bench chain`'s switch) a batch's audit rows are built as
// ever but left unlinked, and no store is read for the last hashes.
func TestAuditRowsOfABatchWithTheChainOffAreUnlinked(t *testing.T) {
	var keyless []*events.Envelope
	for seq := int64(1); seq <= 2; seq++ {
		keyless = append(keyless, &events.Envelope{Type: events.TypeWritten, Org: "acme", Namespace: "support", Seq: seq,
			CommittedAt: time.Unix(1_790_000_000, 0), Revision: &events.Revision{Op: "memory.set", MemoryID: uuid.NewString(), Actor: "token:ops"}})
	}
	out, err := chainAudits(context.Background(), nil, tableset.Serving(), nil, keyless, nil, nil, false, nil)
	if err != nil || len(out) != 2 {
		t.Fatalf("%d rows, %v", len(out), err)
	}
	for _, r := range out {
		if r.PrevHash != "" || r.RowHash != "" || r.Op != "memory.set" {
			t.Fatalf("row %+v: built, unlinked", r.Row)
		}
	}
}
