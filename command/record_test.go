package command

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/outbox"
)

// The commit queues a revision's record by reference (its envelope with a stand-in for
// the content, and its vectors); the relay seals the content from the journal's row as
// it publishes. What reaches the topic must be the record the commit used to queue
// whole: the same envelope bytes but for the sealed content's nonce and ciphertext, and
// the same content once opened. A revision redacted before it is published goes out
// with its plain fields and nothing that opens.
func TestAReferencedRecordPublishesTheBytesOfTheWholeOne(t *testing.T) {
	at := time.Date(2026, 12, 5, 18, 30, 1, 123456789, time.UTC)
	validAt := at.Add(-time.Hour)
	row := &memrow.Row{
		Identity: memrow.Identity{Org: "acme", Namespace: "notes", Agent: "a", UserID: "alice", SessionID: "s1", MemoryKey: "diet & <food>"},
		MemoryID: "0b8e6e1c-4d25-4c55-9b8e-3e1f3f5a2b10", Version: at.UnixNano(), Seq: 42, MemoryType: "fact",
		Status: memrow.Status("active"), Value: json.RawMessage(`{"text":"likes <b>tea</b> & \"scones\"","n":1.5}`),
		ContentSHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Tags:          []string{"food", "ü"}, Entities: []string{"tea"}, EntityTypes: map[string]string{"tea": "drink"},
		Relations:  []events.Relation{{Subject: "alice", Predicate: "likes", Object: "tea", ValidFrom: &validAt}},
		Confidence: 0.37, CreatedAt: at.Add(-time.Minute), UpdatedAt: at, ValidAt: &validAt, ConflictWith: []string{"x"},
	}
	rec := revisionRecord{row: row, op: "memory.set", event: events.TypeWritten, prevVersion: 7, requestID: "req-1",
		vector: []float32{0.25, -1, 3.5e-7}, keyVector: []float32{1, 2}, chunkVectors: [][]float32{{1}, {2, 3}},
		userRefKey: bytes.Repeat([]byte{3}, 32), traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		audit: &events.AuditNote{Kind: events.AuditBatch, Op: "memory.bulk_set", Actor: "t", FirstSeq: 41, LastSeq: 42, Members: []string{"m1", "m2"}}}
	key, err := events.NewDataKey()
	if err != nil {
		t.Fatal(err)
	}
	whole, wholeHeaders, err := encodeRecord(rec, key, "loom/test")
	if err != nil {
		t.Fatal(err)
	}
	value, headers, vectors, err := encodeReference(rec, key, "loom/test")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(headers, wholeHeaders) {
		t.Fatalf("headers differ:\n%s\n%s", headers, wholeHeaders)
	}
	if len(value)+len(vectors) >= len(whole) {
		t.Errorf("the row queued by reference holds %d bytes, the whole record %d", len(value)+len(vectors), len(whole))
	}
	_, sealedText, err := heads.AtRest(row, key)
	if err != nil {
		t.Fatal(err)
	}
	queued := outbox.Row{Record: outbox.Record{Org: row.Org, Namespace: row.Namespace, Seq: row.Seq, Value: value, Vectors: vectors}}
	queued.Journal = outbox.Journal{MemoryKey: row.MemoryKey, UserID: row.UserID, Agent: row.Agent, SessionID: row.SessionID, Sealed: sealedText, DataKey: key}
	plain := func(b []byte) ([]byte, error) { return b, nil }
	published, handed, err := outbox.Complete(queued, plain)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(handed, key) {
		t.Errorf("the key handed to the index follower is %x, want the revision's %x", handed, key)
	}
	got, want := decodeOpened(t, published, key), decodeOpened(t, whole, key)
	if !reflect.DeepEqual(got.content, want.content) {
		t.Errorf("the published content is\n%+v\nwant\n%+v", got.content, want.content)
	}
	if sealedOf(published) == nil || !bytes.Equal(withSealed(whole, sealedOf(published)), published) {
		t.Errorf("the published envelope is\n%s\nwant (but for its sealed content)\n%s", published, whole)
	}

	queued.Journal.Sealed, queued.Journal.DataKey = nil, nil // redacted before it was published
	published, handed, err = outbox.Complete(queued, plain)
	if err != nil {
		t.Fatal(err)
	}
	if handed != nil {
		// The key it was sealed under is nobody's: handed over, it would open an empty
		// content where the follower must find the revision keyless.
		t.Errorf("a redacted revision's record hands a key over")
	}
	env, err := events.Decode(published)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.Open(key, env.ID, env.Sealed); err == nil {
		t.Errorf("a redacted revision's record opens under its destroyed key")
	}
	if !bytes.Equal(withSealed(whole, sealedOf(published)), published) {
		t.Errorf("a redacted revision's record changed its plain fields:\n%s", published)
	}
}

type openedRecord struct {
	env     *events.Envelope
	content *events.Content
}

func decodeOpened(t *testing.T, value, key []byte) openedRecord {
	t.Helper()
	env, err := events.Decode(value)
	if err != nil {
		t.Fatal(err)
	}
	c, err := events.Open(key, env.ID, env.Sealed)
	if err != nil {
		t.Fatal(err)
	}
	return openedRecord{env: env, content: c}
}

// sealedOf is the encoded sealed content of a record value.
func sealedOf(value []byte) []byte {
	var v struct {
		Sealed json.RawMessage `json:"sealed"`
	}
	if json.Unmarshal(value, &v) != nil {
		return nil
	}
	return v.Sealed
}

// withSealed is value with its sealed content replaced by sealed.
func withSealed(value, sealed []byte) []byte {
	return bytes.Replace(value, sealedOf(value), sealed, 1)
}
