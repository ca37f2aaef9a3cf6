package command

import (
	"errors"
	"fmt"
	"testing"

	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

func TestRedactionLineage(t *testing.T) {
	// A key's journal: A, A (a pin), B, B (a delete's tombstone), then A written anew.
	journal := []journalVersion{{seq: 1, version: 10, sha: "A"}, {seq: 2, version: 20, sha: "A"}, {seq: 3, version: 30, sha: "B"},
		{seq: 4, version: 40, sha: "B"}, {seq: 5, version: 50, sha: "A"}}
	cases := []struct {
		name   string
		named  int64
		upTo   int // the journal's first upTo versions exist
		head   *memrow.Row
		want   string
		status int
	}{
		{"a version and the pin that copied it", 10, 5, &memrow.Row{Version: 50}, "[10 20]", 0},
		{"the deleted head is a copy", 30, 4, &memrow.Row{Version: 40, Tombstone: true}, "[30 40]", 0},
		{"the live head holds the text", 30, 4, &memrow.Row{Version: 40}, "", 409},
		{"the live head itself", 50, 5, &memrow.Row{Version: 50}, "", 409},
		{"no such version", 15, 5, &memrow.Row{Version: 50}, "", 404},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var from []journalVersion
			for _, v := range journal[:c.upTo] {
				if v.version >= c.named {
					from = append(from, v)
				}
			}
			got, err := redactionLineage(from, c.named, c.head)
			if c.status != 0 {
				var he *httperr.Error
				if !errors.As(err, &he) || he.Status != c.status {
					t.Fatalf("got %v, %v; want %d", got, err, c.status)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var versions []int64
			for _, v := range got {
				versions = append(versions, v.version)
			}
			if fmt.Sprint(versions) != c.want {
				t.Fatalf("lineage %v, want %s", versions, c.want)
			}
		})
	}
}
