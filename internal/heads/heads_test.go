package heads

import (
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
