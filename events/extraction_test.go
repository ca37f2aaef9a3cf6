package events

import (
	"errors"
	"testing"
	"time"
)

func TestExtractionRequestRoundTrip(t *testing.T) {
	key, err := NewDataKey()
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"messages":[{"role":"user","content":"I moved to Lisbon"}]}`)
	sealed, err := SealExtraction(key, "acme", "q1", payload)
	if err != nil {
		t.Fatal(err)
	}
	r := &ExtractionRequest{Version: ExtractionEnvelopeVersion, Type: TypeExtractionRequested, Org: "acme", Namespace: "support",
		QueueID: "q1", Agent: "bot", UserID: "alice", SessionID: "-", RequestedAt: time.Unix(1700000000, 0), Attempt: 1, Sealed: sealed}
	b, err := EncodeExtraction(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeExtraction(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.QueueID != "q1" || got.UserID != "alice" || !got.RequestedAt.Equal(r.RequestedAt) {
		t.Fatalf("decoded %+v", got)
	}
	plain, err := OpenExtraction(key, "acme", "q1", got.Sealed)
	if err != nil || string(plain) != string(payload) {
		t.Fatalf("opened %q, %v", plain, err)
	}
	// A payload moved to another request does not open, nor under another key.
	if _, err := OpenExtraction(key, "acme", "q2", got.Sealed); !errors.Is(err, ErrSealBroken) {
		t.Fatalf("opened under another queue_id: %v", err)
	}
	other, _ := NewDataKey()
	if _, err := OpenExtraction(other, "acme", "q1", got.Sealed); !errors.Is(err, ErrSealBroken) {
		t.Fatalf("opened under another key: %v", err)
	}
	r.Sealed = nil
	if _, err := EncodeExtraction(r); !errors.Is(err, ErrInvalidEnvelope) {
		t.Fatalf("a request without its payload encoded: %v", err)
	}
}
