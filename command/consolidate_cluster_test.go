package command

import (
	"testing"
	"time"

	"github.com/loomplane/loom/internal/memrow"
)

func TestClusterCandidatesKeepsSubjectTypeAndPolarityApart(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	row := func(id, user, typ string, tags, entities []string, age int) *memrow.Row {
		return &memrow.Row{Identity: memrow.Identity{UserID: user, Agent: "-"}, MemoryID: id, MemoryType: typ, Tags: tags,
			Entities: entities, UpdatedAt: at.Add(-time.Duration(age) * time.Hour)}
	}
	near, far := []float32{1, 0.1, 0}, []float32{1, 0.12, 0}
	other := []float32{0, 0, 1}
	cands := []consolidationCandidate{
		{row("a", "u", "fact", nil, nil, 0), near},
		{row("b", "u", "fact", nil, nil, 1), far},
		{row("c", "u", "fact", []string{"suppression"}, nil, 2), near}, // a suppression: never with a positive
		{row("d", "v", "fact", nil, nil, 3), near},                     // another user
		{row("e", "u", "preference", nil, nil, 4), near},               // another type
		{row("f", "u", "fact", nil, nil, 5), other},                    // not close
		{row("g", "u", "fact", []string{"suppression"}, nil, 6), far},
	}
	got := clusterCandidates(cands, 0.95, 8, 10)
	ids := func(c []consolidationCandidate) (out []string) {
		for _, m := range c {
			out = append(out, m.row.MemoryID)
		}
		return out
	}
	if len(got) != 2 || len(got[0]) != 2 || len(got[1]) != 2 {
		t.Fatalf("clusters %v; want [a b] and [c g]", got)
	}
	if a, b := ids(got[0]), ids(got[1]); a[0] != "a" || a[1] != "b" || b[0] != "c" || b[1] != "g" {
		t.Fatalf("clusters %v %v; want [a b] and [c g]", a, b)
	}
	// A shared entity lowers the bar by entityBonus.
	x := []consolidationCandidate{{row("x", "u", "fact", nil, []string{"Bo"}, 0), []float32{1, 0}},
		{row("y", "u", "fact", nil, []string{"Bo"}, 1), []float32{0.92, 0.39}}}
	if got := clusterCandidates(x, 0.95, 8, 10); len(got) != 1 {
		t.Fatalf("two memories at cosine %.3f naming one entity: %d clusters; want 1", cosine(x[0].vector, x[1].vector), len(got))
	}
	if got := clusterCandidates(x, 0.99, 8, 10); len(got) != 0 {
		t.Fatalf("below the bar even with the bonus: %d clusters; want 0", len(got))
	}
}
