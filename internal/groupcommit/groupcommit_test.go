package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// recorder is a run function that holds each batch until released and keeps what it ran.
type recorder struct {
	mu      sync.Mutex
	batches [][]int
	started chan struct{}
	release chan struct{}
}

func newRecorder() *recorder {
	return &recorder{started: make(chan struct{}, 100), release: make(chan struct{}, 100)}
}

func (r *recorder) run(ctx context.Context, items []int) []error {
	r.mu.Lock()
	r.batches = append(r.batches, append([]int(nil), items...))
	r.mu.Unlock()
	r.started <- struct{}{}
	<-r.release
	errs := make([]error, len(items))
	for i, it := range items {
		if it%2 == 1 {
			errs[i] = fmt.Errorf("item %d is odd", it)
		}
	}
	return errs
}

// waitQueued waits until n callers of key wait behind the running batch.
func waitQueued[T any](t *testing.T, g *Group[T], key string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		g.mu.Lock()
		q := g.queues[key]
		got := 0
		if q != nil {
			got = len(q.waiting)
		}
		g.mu.Unlock()
		if got == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%d callers never queued", n)
}

func TestCallersThatArriveDuringABatchRunTogetherInOrder(t *testing.T) {
	r := newRecorder()
	g := New(10, nil, r.run)
	results := make(chan string, 10)
	call := func(item int) {
		err := g.Do(context.Background(), "ns", item)
		results <- fmt.Sprintf("%d:%v", item, err)
	}
	go call(0)
	<-r.started
	for i := 1; i <= 4; i++ {
		go call(i)
		waitQueued(t, g, "ns", i)
	}
	r.release <- struct{}{}
	<-r.started
	r.release <- struct{}{}
	got := map[string]bool{}
	for range 5 {
		got[<-results] = true
	}
	if len(r.batches) != 2 || fmt.Sprint(r.batches[1]) != "[1 2 3 4]" {
		t.Fatalf("batches %v, want [0] then [1 2 3 4]", r.batches)
	}
	for _, want := range []string{"0:<nil>", "1:item 1 is odd", "2:<nil>", "3:item 3 is odd", "4:<nil>"} {
		if !got[want] {
			t.Fatalf("answers %v lack %s: each caller gets its own item's error", got, want)
		}
	}
}

func TestBatchesHoldAtMostMaxAndWhatFits(t *testing.T) {
	r := newRecorder()
	// Nothing joins a batch that holds 6.
	g := New(3, func(batch []int, item int) bool { return item != 6 }, r.run)
	done := make(chan struct{}, 10)
	call := func(item int) { g.Do(context.Background(), "ns", item); done <- struct{}{} }
	go call(0)
	<-r.started
	for i, item := range []int{2, 4, 6, 8, 10} {
		go call(item)
		waitQueued(t, g, "ns", i+1)
	}
	for range 4 {
		r.release <- struct{}{}
	}
	for range 6 {
		<-done
	}
	want := "[[0] [2 4 8] [6 10]]"
	if got := fmt.Sprint(r.batches); got != want {
		t.Fatalf("batches %s, want %s", got, want)
	}
}

func TestACallerThatGivesUpBeforeItsBatchNeverRuns(t *testing.T) {
	r := newRecorder()
	g := New(10, nil, r.run)
	go g.Do(context.Background(), "ns", 0)
	<-r.started
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- g.Do(ctx, "ns", 2) }()
	waitQueued(t, g, "ns", 1)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("a caller that gave up answered %v", err)
	}
	r.release <- struct{}{}
	r.release <- struct{}{}
	if err := g.Do(context.Background(), "ns", 4); err != nil {
		t.Fatal(err)
	}
	for _, b := range r.batches {
		for _, it := range b {
			if it == 2 {
				t.Fatalf("batches %v ran the item of a caller that gave up", r.batches)
			}
		}
	}
}

func TestKeysDoNotWaitForEachOther(t *testing.T) {
	r := newRecorder()
	g := New(10, nil, r.run)
	go g.Do(context.Background(), "a", 0)
	<-r.started
	other := make(chan error, 1)
	go func() { other <- g.Do(context.Background(), "b", 2) }()
	select {
	case <-r.started:
	case <-time.After(5 * time.Second):
		t.Fatal("a call of another key waited for a running batch")
	}
	r.release <- struct{}{}
	r.release <- struct{}{}
	if err := <-other; err != nil {
		t.Fatal(err)
	}
}

func TestABatchOutlivesItsLeadersCancellation(t *testing.T) {
	var seen error
	g := New(10, nil, func(ctx context.Context, items []int) []error {
		time.Sleep(20 * time.Millisecond)
		seen = ctx.Err()
		return make([]error, len(items))
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(5 * time.Millisecond); cancel() }()
	if err := g.Do(ctx, "ns", 0); err != nil {
		t.Fatal(err)
	}
	if seen != nil {
		t.Fatalf("the batch saw %v: a leader's cancellation must not end the others' items", seen)
	}
}
