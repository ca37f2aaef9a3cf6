package heads

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/memrow"
)

// An operation by memory id acts on one head, or answers not found: copies in two
// namespaces the caller reaches, or a copy its read scope hides, make the id
// ambiguous to it, and it must not act on the copy it sees in the other's stead.
func TestOneByIDActsOnOneHeadOrNone(t *testing.T) {
	now := time.Now()
	head := func(ns, user string, version int64) *memrow.Row {
		return &memrow.Row{Identity: memrow.Identity{Org: "acme", Namespace: ns, Agent: "-", UserID: user, SessionID: "-", MemoryKey: "k"},
			MemoryID: "m", Version: version, Status: memrow.StatusActive, Value: []byte(`"v"`)}
	}
	deleted := head("a", "alice", 9)
	deleted.Tombstone = true
	everyNamespace := func(string) bool { return true }
	onlyA := func(ns string) bool { return ns == "a" }
	for _, c := range []struct {
		name     string
		heads    []*memrow.Row
		reaches  func(string) bool
		readUser string
		want     int64 // the version acted on; 0: not found
	}{
		{"one head", []*memrow.Row{head("a", "alice", 1)}, everyNamespace, "", 1},
		{"copies in two namespaces", []*memrow.Row{head("a", "alice", 1), head("b", "alice", 2)}, everyNamespace, "", 0},
		{"a copy in a namespace the token does not reach", []*memrow.Row{head("a", "alice", 1), head("b", "alice", 2)}, onlyA, "", 1},
		{"two copies in one namespace: the newest", []*memrow.Row{head("a", "alice", 1), head("a", "bob", 3)}, everyNamespace, "", 3},
		{"a copy the read scope hides", []*memrow.Row{head("a", "alice", 1), head("a", "bob", 3)}, everyNamespace, "alice", 0},
		{"the only copy is another user's", []*memrow.Row{head("a", "bob", 1)}, everyNamespace, "alice", 0},
		{"a deleted copy does not count", []*memrow.Row{head("a", "alice", 1), deleted}, everyNamespace, "alice", 1},
		{"none", nil, everyNamespace, "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := OneByID(c.heads, now, c.reaches, c.readUser)
			switch {
			case c.want == 0 && got != nil:
				t.Fatalf("acted on version %d, want not found", got.Version)
			case c.want != 0 && (got == nil || got.Version != c.want):
				t.Fatalf("acted on %+v, want version %d", got, c.want)
			}
		})
	}
}

// Decode reads back every field of a stored head as encoding/json wrote it.
func TestDecodeReadsBackEveryField(t *testing.T) {
	at := time.Date(2026, 12, 1, 21, 55, 43, 967722076, time.UTC)
	later := at.Add(time.Hour)
	want := memrow.Row{Identity: memrow.Identity{Org: "acme", Namespace: "notes", Agent: "planner", UserID: "alice", SessionID: "s1", MemoryKey: "offsite.city"},
		MemoryID: "2dd69439-cfc7-4795-9ef8-dea2cb73d2a7", Version: 1796162143967722076, Seq: 1234, MemoryType: "fact",
		Status: memrow.StatusConflicted, Tombstone: false, Value: []byte(`{"city":"Porto","note":"<b>\u00e9t\u00e9</b>","n":[1,2.5e-3]}`),
		ContentSHA256: "4f2c6a0e8c1b9f1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899a", Tags: []string{"travel", "q4"}, Entities: []string{"porto"},
		Confidence: 0.875, ReinforcementCount: 3, Actor: "token:898acc17d882", SourceClass: "derived", EmbeddingModel: "hash-v1-384", EmbeddingDim: 384,
		Pinned: true, Locked: true, Sensitivity: memrow.SensitivityHigh, ValidAt: &at, ValidTo: &later, ExpiresAt: &later, OnExpire: "archive",
		SupersededBy: "m9", DuplicateOf: "m8", ConflictWith: []string{"m7", "m6"}, VerifiedBy: "bob", VerifiedAt: &at, JudgementOwed: true, Redacted: true,
		CreatedAt: at, UpdatedAt: later, EntityTypes: map[string]string{"porto": "city"}}
	raw, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	again, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(raw) {
		t.Fatalf("decoded and written again:\n%s\nwant:\n%s", again, raw)
	}
	// The row owns its bytes: the buffer it was read from is the driver's to reuse.
	value := string(got.Value)
	for i := range raw {
		raw[i] = ' '
	}
	if string(got.Value) != value || got.MemoryKey != "offsite.city" {
		t.Fatalf("the row changed with the buffer it was decoded from: %s %q", got.Value, got.MemoryKey)
	}
	if _, err := Decode([]byte(`{"org": "acme", "version": "one"}`)); err == nil {
		t.Fatal("a version that is not a number decoded")
	}
}
