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
