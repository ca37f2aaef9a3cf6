package command

import (
	"slices"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/memrow"
)

// A restore brings a row back conflicted only while a peer is still conflicted and
// lists it, and duplicate only while the original it repeats is still served;
// otherwise it comes back active, without the stale links.
func TestRestoreRequalifiesConflictsAndDuplicates(t *testing.T) {
	now := time.Now()
	row := func(id string, status memrow.Status) *memrow.Row {
		return &memrow.Row{MemoryID: id, Status: status, Value: []byte(`"v"`), EmbeddingDim: 4}
	}
	peer := func(id string, status memrow.Status, lists ...string) *memrow.Row {
		p := row(id, status)
		p.ConflictWith = lists
		return p
	}
	gone := peer("p2", memrow.StatusConflicted, "r")
	gone.Tombstone = true
	for _, c := range []struct {
		name       string
		restored   *memrow.Row
		peers      []*memrow.Row
		wantStatus memrow.Status
		wantLinks  []string // conflict_with, or duplicate_of
	}{
		{"a peer still in conflict with it", &memrow.Row{MemoryID: "r", Status: memrow.StatusConflicted, ConflictWith: []string{"p1", "p2"}},
			[]*memrow.Row{peer("p1", memrow.StatusConflicted, "r"), peer("p2", memrow.StatusActive)}, memrow.StatusConflicted, []string{"p1"}},
		{"the peers resolved their conflict", &memrow.Row{MemoryID: "r", Status: memrow.StatusConflicted, ConflictWith: []string{"p1", "p2"}},
			[]*memrow.Row{peer("p1", memrow.StatusConflicted, "other"), gone}, memrow.StatusActive, nil},
		{"a conflicted row naming no peer", &memrow.Row{MemoryID: "r", Status: memrow.StatusConflicted}, nil, memrow.StatusActive, nil},
		{"its original is still served", &memrow.Row{MemoryID: "r", Status: memrow.StatusDuplicate, DuplicateOf: "o"},
			[]*memrow.Row{row("o", memrow.StatusActive)}, memrow.StatusDuplicate, []string{"o"}},
		{"its original was superseded", &memrow.Row{MemoryID: "r", Status: memrow.StatusDuplicate, DuplicateOf: "o"},
			[]*memrow.Row{row("o", memrow.StatusSuperseded)}, memrow.StatusActive, nil},
		{"its original is gone", &memrow.Row{MemoryID: "r", Status: memrow.StatusDuplicate, DuplicateOf: "o"}, nil, memrow.StatusActive, nil},
		{"an active row stays active", &memrow.Row{MemoryID: "r", Status: memrow.StatusActive}, nil, memrow.StatusActive, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			requalified(c.restored, c.peers, now)
			links := c.restored.ConflictWith
			if c.restored.DuplicateOf != "" {
				links = []string{c.restored.DuplicateOf}
			}
			if c.restored.Status != c.wantStatus || !slices.Equal(links, c.wantLinks) {
				t.Fatalf("restored as %s linked to %v, want %s linked to %v", c.restored.Status, links, c.wantStatus, c.wantLinks)
			}
		})
	}
}
