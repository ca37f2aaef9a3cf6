package query

import (
	"slices"
	"testing"
	"time"
)

func TestQueryEntityNames(t *testing.T) {
	got := queryEntityNames("Where does St. Louis  FC play?")
	for _, want := range []string{"where", "st. louis", "st. louis fc", "louis fc play", "play", "st"} {
		if !slices.Contains(got, want) {
			t.Errorf("%q not among %v", want, got)
		}
	}
	if slices.Contains(got, "play?") == false {
		t.Errorf("the words as written are kept too: %v", got)
	}
	if len(queryEntityNames("  ")) != 0 {
		t.Error("no words, no names")
	}
}

func TestGraphReadHolds(t *testing.T) {
	now := time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC)
	past, future := now.AddDate(0, 0, -5), now.AddDate(0, 0, 21)
	g := graphRead{now: now}
	if !g.holds(future, nil) || !g.holds(past, &future) || g.holds(past, &past) {
		t.Fatal("without as_of: every interval not ended yet, a value dated ahead included")
	}
	at := now.AddDate(0, 0, 22)
	g.asOf = &at
	if g.holds(past, &future) || !g.holds(future, nil) || g.holds(at.Add(time.Second), nil) {
		t.Fatal("with as_of: the intervals holding then")
	}
	g.includeClosed = true
	if !g.holds(past, &past) || g.holds(at.Add(time.Hour), nil) {
		t.Fatal("include_closed: every interval started by as_of")
	}
}
