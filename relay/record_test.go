package relay

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/loomplane/loom/internal/outbox"
)

// A row's headers, stored as JSON [[name, value], …], go on its record in their order
// and with their values as written; headers that do not decode make the row malformed.
func TestARecordCarriesItsRowsHeaders(t *testing.T) {
	pairs := [][2]string{{"ce_id", "acme/notes/7"}, {"ce_type", "loom.memory.written"}, {"ce_tracestate", `a=b,"c"=ü\n`}, {"empty", ""}}
	headers, err := json.Marshal(pairs)
	if err != nil {
		t.Fatal(err)
	}
	r := &Relay{}
	row := outboxRow{outbox.Row{Record: outbox.Record{Org: "acme", Namespace: "notes", Seq: 7, Topic: "t", Key: []byte("k"), Headers: headers, Value: []byte(`{}`)}}}
	rec, err := r.toRecord(row)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Headers) != len(pairs) {
		t.Fatalf("the record has %d headers, want %d", len(rec.Headers), len(pairs))
	}
	for i, h := range rec.Headers {
		if h.Key != pairs[i][0] || string(h.Value) != pairs[i][1] {
			t.Errorf("header %d is %q=%q, want %q=%q", i, h.Key, h.Value, pairs[i][0], pairs[i][1])
		}
	}
	row.Headers = []byte(`[["ce_id",`)
	if _, err := r.toRecord(row); !errors.Is(err, errMalformed) {
		t.Errorf("truncated headers: %v, want a malformed row", err)
	}
}
