package index

import (
	"context"
	"testing"
	"time"
)

// A follower resting at the topic's end goes back to the topic as soon as a search
// starts waiting for a position the index has not reached, and does not rest while
// one waits: a knowledge search that follows a write is not held for the rest.
func TestAWaitingSearchWakesARestingFollower(t *testing.T) {
	x := New(Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rested := make(chan struct{})
	go func() {
		x.rest(ctx, time.Hour)
		close(rested)
	}()
	waited := make(chan error, 1)
	go func() { waited <- x.WaitFor(ctx, "org", "ns", 7) }()
	select {
	case <-rested:
	case <-ctx.Done():
		t.Fatal("the follower rested on while a search waited for a position")
	}
	for x.waiting.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	again := make(chan struct{})
	go func() {
		x.rest(ctx, time.Hour)
		close(again)
	}()
	select {
	case <-again:
	case <-ctx.Done():
		t.Fatal("the follower rested while a search was waiting")
	}
	x.apply([]op{{org: "org", ns: "ns", seq: 7}})
	if err := <-waited; err != nil {
		t.Fatalf("the search's wait: %v", err)
	}
	if n := x.waiting.Load(); n != 0 {
		t.Fatalf("%d searches still counted as waiting after the wait ended", n)
	}
}
