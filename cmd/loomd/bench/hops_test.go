package bench

import (
	"slices"
	"testing"
	"time"
)

// hopWrite is a write's marks from its hops' lengths: its keys read half way through
// the apply hop, its content opened at three quarters, its answer 1 ms after the
// commit.
func hopWrite(pickup, fetch, apply, wake time.Duration) hopTimes {
	at := time.Unix(1_700_000_000, 0)
	fetched := at.Add(pickup + fetch)
	return hopTimes{committed: at, produced: at.Add(pickup), acked: at.Add(pickup + time.Millisecond),
		fetched: fetched, keysRead: fetched.Add(apply / 2), opened: fetched.Add(apply * 3 / 4),
		applied: fetched.Add(apply), visible: fetched.Add(apply + wake),
		answered: at.Add(time.Millisecond), seenCommit: true}
}

// A write's hops are read from its marks, and the slowest tenth's means name the hop
// its time went to.
func TestHopsSplitTheSlowWritesByWhereTheirTimeWent(t *testing.T) {
	ms := time.Millisecond
	var ws []hopTimes
	for range 18 {
		ws = append(ws, hopWrite(ms, ms, ms, ms))
	}
	// The two slowest writes waited on the fetch.
	ws = append(ws, hopWrite(ms, 81*ms, 4*ms, ms), hopWrite(ms, 101*ms, 4*ms, ms))
	s := splitHops(ws)
	if len(s.total) != 20 || s.total[0] != 4*ms || s.fromAnswer[0] != 3*ms {
		t.Fatalf("commit→visible %v, answer→visible %v", s.total, s.fromAnswer)
	}
	means, n := s.slowest(0.9)
	if n != 2 {
		t.Fatalf("the slowest tenth holds %d writes, want 2", n)
	}
	want := []time.Duration{ms, 91 * ms, 2 * ms, ms, ms, ms}
	for i, m := range means {
		if m != want[i] {
			t.Errorf("hop %q: mean %v in the slowest tenth, want %v", s.names[i], m, want[i])
		}
	}
}

// The writes over the tail's bound are counted by the hop they spent the longest in,
// slowest first.
func TestTheTailIsClassifiedByItsLongestHop(t *testing.T) {
	ms := time.Millisecond
	s := splitHops([]hopTimes{
		hopWrite(ms, ms, 4*ms, ms),         // 6 ms from the answer: under the bound
		hopWrite(400*ms, ms, 4*ms, ms),     // the relay's pickup
		hopWrite(ms, 2*ms, 60*ms, ms),      // the keys' read (30 ms of the 60)
		hopWrite(ms, 100*ms, 4*ms, ms),     // the fetch
		hopWrite(15*ms, 2*ms, 4*ms, 10*ms), // the pickup again, below the bound alone
	})
	writes, byHop := s.over(lagTailBound)
	if len(writes) != 4 {
		t.Fatalf("%d writes over %v, want 4", len(writes), lagTailBound)
	}
	if want := []int{2, 1, 1, 0, 0, 0}; !slices.Equal(byHop, want) {
		t.Errorf("writes by longest hop %v, want %v", byHop, want)
	}
	if writes[0].longest != 0 || writes[0].fromAnswer != 405*ms || writes[1].longest != 1 {
		t.Errorf("slowest first: %+v", writes[:2])
	}
}
