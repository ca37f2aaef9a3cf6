package query

import (
	"testing"
	"time"

	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/revisions"
)

// A key's versions hold from their valid_at (else when written) until the next began;
// a subject's timeline is in valid time across keys, and links what superseded what.
func TestTimelineOrdersInValidTime(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2024, 1, d, 0, 0, 0, 0, time.UTC) }
	v := func(id, key string, version int64, validAt *time.Time, written time.Time, supersededBy string) revisions.Version {
		return revisions.Version{Event: "memory.written", Row: &memrow.Row{Identity: memrow.Identity{MemoryKey: key}, MemoryID: id, Version: version,
			ValidAt: validAt, UpdatedAt: written, SupersededBy: supersededBy, Value: []byte(`"x"`)}}
	}
	d1, d5 := day(1), day(5)
	city := timelineOf(memrow.Identity{MemoryKey: "city"}, []revisions.Version{v("a", "city", 1, &d1, day(20), ""), v("a", "city", 2, &d5, day(21), "b")})
	home := timelineOf(memrow.Identity{MemoryKey: "home"}, []revisions.Version{v("b", "home", 1, nil, day(3), "")})
	entries := append(city, home...)
	orderTimeline(entries)
	var got []string
	for _, e := range entries {
		got = append(got, e.Cite)
	}
	if want := []string{"m:a@1", "m:b@1", "m:a@2"}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("order %v, want %v", got, want)
	}
	if !entries[0].ValidTo.Equal(d5) || entries[2].ValidTo != nil {
		t.Fatalf("valid_to: %v, %v", entries[0].ValidTo, entries[2].ValidTo)
	}
	if len(entries[1].Supersedes) != 1 || entries[1].Supersedes[0] != "a" {
		t.Fatalf("home supersedes %v, want [a]", entries[1].Supersedes)
	}
}
