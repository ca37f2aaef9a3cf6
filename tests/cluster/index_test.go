package cluster

import (
	"context"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/loomplane/loom/tests/testenv"
)

// A query replica killed (SIGKILL) while writes and searches run, and started again at
// once, warms its search index by replaying the topic while the load goes on. Every
// search it answers holds the acknowledged write it looks for, at its version, or is
// a retryable 503: never an answer from an index that has not caught up. Once ready
// (its index warm) it serves searches again, and its index holds the namespaces.
func TestQueryReplicaKilledMidLoadAnswersNothingStale(t *testing.T) {
	core := newProc(t, "core", "command,relay,projector", nil)
	replica := newProc(t, "query", "query", nil)
	core.start(t)
	core.waitReady(t)
	replica.start(t)
	replica.waitReady(t)
	token := loomdCLI(t, "token", "create", "--org", org, "--role", "admin", "--name", "index test")
	c := newCaller(token)
	namespaces := []string{testenv.Unique(t, "a"), testenv.Unique(t, "b")}
	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	var wg sync.WaitGroup
	book, writes := startWriters(ctx, &wg, 10, c, []*proc{core}, namespaces)
	searches := &tally{counts: map[string]int{}}
	wg.Add(1)
	go func() {
		defer wg.Done()
		search(ctx, rand.New(rand.NewSource(200)), c, []*proc{replica}, namespaces, book, searches)
	}()
	pause := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	pause(3 * time.Second)
	replica.kill()
	replica.start(t)
	replica.waitReady(t)
	searches.mu.Lock()
	before := searches.counts["ok"]
	searches.mu.Unlock()
	pause(3 * time.Second)
	stopLoad()
	wg.Wait()

	checkTallies(t, writes, searches)
	t.Logf("writes: %v; searches: %v", writes.counts, searches.counts)
	if writes.counts["ok"] < 20 || before < 5 || searches.counts["ok"]-before < 5 {
		t.Fatalf("too little load got through: writes %v, searches %v (%d ok before the restart was ready)", writes.counts, searches.counts, before)
	}
	operator := newCaller(loomdCLI(t, "token", "create", "--operator", "--name", "index test operator"))
	h, err := operator.at(replica.URL()).Health(context.Background())
	if err != nil || h.Index == nil || !h.Index.Warm || h.Index.Entries == 0 || h.Index.Namespaces < len(namespaces) {
		t.Fatalf("the restarted replica's index: %+v %v", h.Index, err)
	}
}
