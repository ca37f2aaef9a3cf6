package command

import (
	"testing"
	"time"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

func TestPlanKey(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	row := func(sha string, mod func(*memrow.Row)) *memrow.Row {
		r := &memrow.Row{Identity: memrow.Identity{MemoryKey: "k"}, MemoryID: "m", Status: memrow.StatusActive, ContentSHA256: sha, Value: []byte(`"` + sha + `"`)}
		if mod != nil {
			mod(r)
		}
		return r
	}
	tomb := func(r *memrow.Row) { r.Tombstone = true }
	pinned := func(r *memrow.Row) { r.Pinned = true }
	past := at.Add(-time.Hour)
	cases := []struct {
		name       string
		head, then *memrow.Row
		action     string
		event      events.Type
		refused    string
	}{
		{"unchanged since", row("A", nil), row("A", nil), "", "", ""},
		{"a new value since", row("B", nil), row("A", nil), rollbackReinstate, events.TypeRevised, ""},
		{"deleted since", row("A", tomb), row("A", nil), rollbackReinstate, events.TypeRestored, ""},
		{"pinned since, same value", row("A", pinned), row("A", nil), rollbackReinstate, events.TypeStatusChanged, ""},
		{"written after as_of", row("A", nil), nil, rollbackTombstone, events.TypeTombstoned, ""},
		{"deleted then and now", row("A", tomb), row("A", tomb), "", "", ""},
		{"deleted at as_of, live now", row("B", nil), row("A", tomb), rollbackTombstone, events.TypeTombstoned, ""},
		{"expired at as_of", row("B", nil), row("A", func(r *memrow.Row) { r.ExpiresAt = &past }), rollbackTombstone, events.TypeTombstoned, ""},
		{"locked head", row("B", func(r *memrow.Row) { r.Locked = true }), row("A", nil), rollbackReinstate, events.TypeRevised, httperr.CodeLocked},
		{"pinned head, another value", row("B", pinned), row("A", nil), rollbackReinstate, events.TypeRevised, httperr.CodePinnedConflict},
		{"pinned head, a pinned value", row("B", pinned), row("A", pinned), rollbackReinstate, events.TypeRevised, ""},
		{"pinned head written after", row("B", pinned), nil, rollbackTombstone, events.TypeTombstoned, httperr.CodePinnedConflict},
		{"a locked deleted head comes back", row("A", func(r *memrow.Row) { r.Tombstone, r.Locked = true, true }), row("A", nil), rollbackReinstate, events.TypeRestored, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kp := planKey(c.head, c.then, at)
			if kp.action != c.action || kp.event != c.event || kp.refused != c.refused {
				t.Fatalf("got %q %q refused %q, want %q %q refused %q", kp.action, kp.event, kp.refused, c.action, c.event, c.refused)
			}
			switch kp.action {
			case rollbackReinstate:
				if kp.row.ContentSHA256 != c.then.ContentSHA256 || kp.row.Tombstone {
					t.Fatalf("reinstated row %+v, want the version at as_of", kp.row)
				}
			case rollbackTombstone:
				if !kp.row.Tombstone || kp.row.ContentSHA256 != c.head.ContentSHA256 {
					t.Fatalf("tombstone %+v, want a deleted copy of the head", kp.row)
				}
			}
		})
	}
}
