package events

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

var committedAt = time.Date(2026, 3, 14, 9, 26, 53, 589793238, time.UTC)

// testUserRefKey is an org's user reference key in the fixtures.
var testUserRefKey = []byte("0123456789abcdef0123456789abcdef")

func testUserRef(t *testing.T, userID string) string {
	t.Helper()
	ref, err := UserRef(testUserRefKey, userID)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func testAgentRef(t *testing.T, agent string) string {
	t.Helper()
	ref, err := AgentRef(testUserRefKey, agent)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func testSessionRef(t *testing.T, session string) string {
	t.Helper()
	ref, err := SessionRef(testUserRefKey, session)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// revisionEnvelope builds a valid, sealed envelope of a revision type, as the relay would.
func revisionEnvelope(t *testing.T, typ Type, seq int64, tombstone bool) *Envelope {
	t.Helper()
	id := RecordID("acme", "support", seq)
	content := &Content{
		MemoryKey: "customer.tier",
		Value:     json.RawMessage(`{"tier":"gold","since":2021}`),
		Tags:      []string{"billing"},
		Embedding: Vector{0.25, -1.5, 3},
		UserID:    "u-42",
		Agent:     "triage-bot",
		SessionID: "s-1",
	}
	sum := sha256.Sum256(content.Value)
	content.ContentSHA256 = hex.EncodeToString(sum[:])
	key, err := NewDataKey()
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := Seal(key, id, content)
	if err != nil {
		t.Fatal(err)
	}
	var redaction *Redaction
	if typ == TypeRedacted {
		redaction = &Redaction{Versions: []int64{committedAt.UnixNano() - 1000, committedAt.UnixNano() - 500}}
	}
	return &Envelope{
		Redaction:   redaction,
		Version:     EnvelopeVersion,
		ID:          id,
		Type:        typ,
		Org:         "acme",
		Namespace:   "support",
		Seq:         seq,
		CommittedAt: committedAt,
		Revision: &Revision{
			Op:                 "memory.set",
			MemoryID:           "mem_01HZX",
			Version:            committedAt.UnixNano(),
			PrevVersion:        committedAt.UnixNano() - 1000,
			AgentRef:           testAgentRef(t, "triage-bot"),
			UserRef:            testUserRef(t, "u-42"),
			SessionRef:         testSessionRef(t, "s-1"),
			MemoryType:         "fact",
			Status:             "active",
			Tombstone:          tombstone,
			Confidence:         0.87,
			ReinforcementCount: 2,
			Actor:              "agent:triage-bot",
			SourceClass:        "agent",
			EmbeddingModel:     "minilm-l6",
			EmbeddingDim:       3,
			CreatedAt:          committedAt.Add(-time.Hour),
			UpdatedAt:          committedAt,
			RequestID:          "req-7",
		},
		Sealed: sealed,
	}
}

// plainEnvelope builds a valid envelope of a type that carries no revision.
func plainEnvelope(typ Type, seq int64) *Envelope {
	var erasure *Erasure
	if typ == TypeErased {
		ref, _ := UserRef(testUserRefKey, "u-42")
		erasure = &Erasure{ID: "0b6f1c9e-4d1a-4c4e-9a59-3f2f2a7d9b10", Scope: ErasureScopeUser, UserRef: ref, Generation: seq, Withdrawn: 2}
	}
	return &Envelope{
		Erasure:     erasure,
		Version:     EnvelopeVersion,
		ID:          RecordID("acme", "support", seq),
		Type:        typ,
		Org:         "acme",
		Namespace:   "support",
		Seq:         seq,
		CommittedAt: committedAt,
	}
}

// turnsEnvelope builds a valid memory.turns_observed record of two turns of agent
// "triage-bot", user "u-42" and session "s-1", each sealed under keys[i].
func turnsEnvelope(t *testing.T, seq int64, keys [][]byte) *Envelope {
	t.Helper()
	id := RecordID("acme", "support", seq)
	items := make([]TurnMeta, len(keys))
	for i, key := range keys {
		turnID := fmt.Sprintf("turn-%d", i)
		sealed, err := SealTurn(key, id, turnID, TurnText{Text: fmt.Sprintf("turn %d said", i), Agent: "triage-bot", SessionID: "s-1"})
		if err != nil {
			t.Fatal(err)
		}
		items[i] = TurnMeta{TurnID: turnID, Role: "user", MessageIndex: i, OccurredAt: committedAt, Sealed: sealed}
	}
	return &Envelope{Version: EnvelopeVersion, ID: id, Type: TypeTurnsObserved, Org: "acme", Namespace: "support", Seq: seq,
		CommittedAt: committedAt, Turns: &Turns{AgentRef: testAgentRef(t, "triage-bot"), UserRef: testUserRef(t, "u-42"),
			SessionRef: testSessionRef(t, "s-1"), Source: "observe", Items: items}}
}

func validTurns(t *testing.T) *Envelope {
	keys := [][]byte{make([]byte, 32), make([]byte, 32)}
	return turnsEnvelope(t, 1, keys)
}
