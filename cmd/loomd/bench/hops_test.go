package bench

import (
	"testing"
	"time"
)

// A write's hops are read from its marks, and the slowest tenth's means name the hop
// its time went to.
func TestHopsSplitTheSlowWritesByWhereTheirTimeWent(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	write := func(pickup, produce, fetch, apply time.Duration) hopTimes {
		return hopTimes{committed: at, produced: at.Add(pickup), acked: at.Add(pickup + produce),
			fetched: at.Add(pickup + fetch), applied: at.Add(pickup + fetch + apply), seenCommit: true}
	}
	var ws []hopTimes
	for range 18 {
		ws = append(ws, write(time.Millisecond, time.Millisecond, time.Millisecond, time.Millisecond))
	}
	// The two slowest writes waited on the produce.
	ws = append(ws, write(time.Millisecond, 80*time.Millisecond, 81*time.Millisecond, time.Millisecond),
		write(time.Millisecond, 100*time.Millisecond, 101*time.Millisecond, time.Millisecond))
	s := splitHops(ws)
	if len(s.total) != 20 || s.total[0] != 3*time.Millisecond {
		t.Fatalf("totals %v", s.total)
	}
	means, n := s.slowest(0.9)
	if n != 2 {
		t.Fatalf("the slowest tenth holds %d writes, want 2", n)
	}
	want := []time.Duration{time.Millisecond, 90 * time.Millisecond, 91 * time.Millisecond, time.Millisecond}
	for i, m := range means {
		if m != want[i] {
			t.Errorf("hop %q: mean %v in the slowest tenth, want %v", s.names[i], m, want[i])
		}
	}
}
