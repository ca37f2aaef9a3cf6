package query

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/memrow"
)

func cand(key string) *candidate {
	return &candidate{identity: memrow.Identity{Namespace: "ns", MemoryKey: key}}
}

func TestPartsTakeTurns(t *testing.T) {
	whole := []*candidate{cand("a"), cand("b"), cand("c")}
	part1 := []*candidate{cand("x"), cand("a")}
	part2 := []*candidate{cand("b"), cand("y")}
	var got []string
	for _, c := range takeTurns([][]*candidate{whole, part1, part2}) {
		got = append(got, c.identity.MemoryKey)
	}
	if !slices.Equal(got, []string{"a", "x", "b", "y", "c"}) {
		t.Errorf("merged %v: each pool's next row in turn, each row once", got)
	}
}

func TestStatesDate(t *testing.T) {
	spans := []dateRange{{From: day0(2025, 5, 1), To: day0(2025, 6, 1)}}
	row := func(value string, validAt *time.Time) *memrow.Row {
		v, _ := json.Marshal(value)
		return &memrow.Row{Value: v, ValidAt: validAt}
	}
	may := day0(2025, 5, 20)
	for _, c := range []struct {
		r    *memrow.Row
		want bool
	}{
		{row("Bramblewood is due 2025-05-15.", nil), true},
		{row("Mistral must reach GA by May 30, 2025.", nil), true},
		{row("Ostara is due 30 June 2025.", nil), false},
		{row("the office moved", &may), true},
	} {
		if got := statesDate(c.r, spans); got != c.want {
			t.Errorf("%s: %v, want %v", c.r.Value, got, c.want)
		}
	}
}
