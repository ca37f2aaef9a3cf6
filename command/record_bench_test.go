package command

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/outbox"
)

// benchRecord is a revision as the set scenario writes it: a sentence of text and a
// value and key vector of 384 dimensions.
func benchRecord() revisionRecord {
	at := time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC)
	vec := func(seed float32) []float32 {
		v := make([]float32, 384)
		for i := range v {
			v[i] = seed * float32(i%17) / 17
		}
		return v
	}
	row := &memrow.Row{
		Identity: memrow.Identity{Org: "acme", Namespace: "bench-set-1-1-0", Agent: "-", UserID: "-", SessionID: "-", MemoryKey: "k1234"},
		MemoryID: "0b8e6e1c-4d25-4c55-9b8e-3e1f3f5a2b10", Version: at.UnixNano(), Seq: 1234, MemoryType: "fact",
		Status: memrow.Status("active"), Value: json.RawMessage(fmt.Sprintf("%q", strings.Repeat("lorem ipsum dolor ", 6))),
		ContentSHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Tags:          []string{}, Confidence: 0.5, CreatedAt: at, UpdatedAt: at,
	}
	return revisionRecord{row: row, op: "memory.set", event: events.TypeWritten, requestID: "req-1",
		vector: vec(1), keyVector: vec(-1), userRefKey: bytes.Repeat([]byte{3}, 32),
		traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
}

// The commit's encoding of a revision queued by reference (its envelope, headers and
// sealed vectors), a write's share of the http role's CPU and allocations.
func BenchmarkEncodeReference(b *testing.B) {
	rec := benchRecord()
	key, err := events.NewDataKey()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := encodeReference(rec, key, "loom/bench"); err != nil {
			b.Fatal(err)
		}
	}
}

// The relay's completion of a row queued by reference: its text opened, its vectors
// opened and the content sealed into the envelope.
func BenchmarkComplete(b *testing.B) {
	rec := benchRecord()
	key, err := events.NewDataKey()
	if err != nil {
		b.Fatal(err)
	}
	value, headers, vectors, err := encodeReference(rec, key, "loom/bench")
	if err != nil {
		b.Fatal(err)
	}
	_, sealedText, err := heads.AtRest(rec.row, key)
	if err != nil {
		b.Fatal(err)
	}
	row := rec.row
	plain := func(b []byte) ([]byte, error) { return b, nil }
	b.ReportAllocs()
	for b.Loop() {
		queued := []outbox.Row{{Record: outbox.Record{Org: row.Org, Namespace: row.Namespace, Seq: row.Seq, Headers: headers, Value: value, Vectors: vectors}}}
		queued[0].Journal = outbox.Journal{MemoryKey: row.MemoryKey, UserRef: "-", Agent: row.Agent, SessionID: row.SessionID, Sealed: sealedText, DataKey: key}
		outbox.OpenTexts(queued, plain)
		if _, _, err := outbox.Complete(queued[0], plain); err != nil {
			b.Fatal(err)
		}
	}
}
