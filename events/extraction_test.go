package events

import (
	"bytes"
	"encoding/json"
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
	refKey := make([]byte, UserRefKeySize)
	ref, _ := UserRef(refKey, "alice")
	agentRef, _ := AgentRef(refKey, "travel-bot")
	sessionRef, _ := SessionRef(refKey, "s-1234")
	r := &ExtractionRequest{Version: ExtractionEnvelopeVersion, Type: TypeExtractionRequested, Org: "acme", Namespace: "support",
		QueueID: "q1", AgentRef: agentRef, UserRef: ref, SessionRef: sessionRef, RequestedAt: time.Unix(1700000000, 0), Attempt: 1, Sealed: sealed}
	b, err := EncodeExtraction(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeExtraction(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.QueueID != "q1" || got.UserRef != ref || got.UserID != "" || !got.RequestedAt.Equal(r.RequestedAt) ||
		got.AgentRef != agentRef || got.SessionRef != sessionRef {
		t.Fatalf("decoded %+v", got)
	}
	for _, clear := range []string{"alice", "travel-bot", "s-1234", `"agent":`, `"session_id":`} {
		if bytes.Contains(b, []byte(clear)) {
			t.Fatalf("the record holds %s in the clear: %s", clear, b)
		}
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

// A version 2 request names its user by user_ref only, a version 3 request its agent
// and session by agent_ref and session_ref too; records of versions 1 and 2, which
// named them in the clear, still decode.
func TestExtractionRequestUserInTheClearOnlyInVersion1(t *testing.T) {
	key, _ := NewDataKey()
	sealed, err := SealExtraction(key, "acme", "q1", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := UserRef(make([]byte, UserRefKeySize), "alice")
	base := ExtractionRequest{Version: 2, Type: TypeExtractionRequested, Org: "acme", Namespace: "support", QueueID: "q1",
		Agent: "bot", SessionID: "-", RequestedAt: time.Unix(1700000000, 0), Attempt: 1, Sealed: sealed}
	for name, r := range map[string]ExtractionRequest{
		"version 2 with user_id":     func() ExtractionRequest { r := base; r.UserRef, r.UserID = ref, "alice"; return r }(),
		"version 2 without user_ref": base,
		"version 1 with user_ref":    func() ExtractionRequest { r := base; r.Version, r.UserRef = 1, ref; return r }(),
		"version 3 with the agent":   func() ExtractionRequest { r := base; r.Version, r.UserRef, r.SessionID = 3, ref, ""; return r }(),
		"version 3 with the session": func() ExtractionRequest { r := base; r.Version, r.UserRef, r.Agent = 3, ref, ""; return r }(),
		"version 2 with agent_ref":   func() ExtractionRequest { r := base; r.UserRef, r.AgentRef = ref, "-"; return r }(),
		"version 4": func() ExtractionRequest {
			r := base
			r.Version, r.UserRef, r.Agent, r.SessionID = 4, ref, "", ""
			return r
		}(),
	} {
		if _, err := EncodeExtraction(&r); !errors.Is(err, ErrInvalidEnvelope) {
			t.Errorf("%s: encoded (%v)", name, err)
		}
	}
	v1 := []byte(`{"envelope_version":1,"type":"loom.extraction.requested","org":"acme","namespace":"support","queue_id":"q1",` +
		`"agent":"bot","user_id":"alice","session_id":"-","requested_at":"2023-11-14T22:13:20Z","attempt":1,"sealed":` + string(mustJSON(t, sealed)) + `}`)
	got, err := DecodeExtraction(v1)
	if err != nil || got.UserID != "alice" || got.Version != 1 {
		t.Fatalf("a version 1 record: %+v, %v", got, err)
	}
	v2 := base
	v2.UserRef = ref
	b, err := EncodeExtraction(&v2)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeExtraction(b); err != nil || got.Agent != "bot" || got.SessionID != "-" || got.Version != 2 {
		t.Fatalf("a version 2 record: %+v, %v", got, err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
