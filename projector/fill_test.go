package projector

import "testing"

func TestPolledIsBehindWhileAFetchShowsMore(t *testing.T) {
	b := polled{lag: map[int32]int64{0: 0, 3: 0}}
	if b.behind() {
		t.Fatal("caught up on every partition, yet behind")
	}
	b.lag[2] = 7
	if !b.behind() {
		t.Fatal("7 records past the batch on partition 2, yet not behind")
	}
}

// A batch's backlog is every partition's records past it: a replay's is the topic's
// rest, which fills the batch, so it polls until full.
func TestPolledBacklogSumsThePartitions(t *testing.T) {
	b := polled{lag: map[int32]int64{0: 1200, 3: 0, 5: 4000}}
	if got := b.backlog(); got != 5200 {
		t.Fatalf("backlog %d, want 5200", got)
	}
}
