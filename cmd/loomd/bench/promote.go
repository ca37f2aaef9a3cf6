package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/loomplane/loom/client"
)

// promoteUsers are the scenario's writer, whose agent promotes, and the other user
// whose search must find the promotion.
const (
	promoteWriter = "alice"
	promoteReader = "bob"
	promoteAgent  = "bench"
)

// visibility collects, per sample of one kind of write (a plain set or a promotion),
// how long the write's call took, how long after its answer (and after it was sent) a
// search found it, how long that search waited at the barrier, and what the same
// search cost again with nothing pending.
type visibility struct {
	mu                                 sync.Mutex
	call, toFound, sentToFound, waited []time.Duration
	again                              []time.Duration
	misses                             int // searches after the answer that did not find the row
}

func (v *visibility) add(call, toFound, waited, again time.Duration, misses int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.call = append(v.call, call)
	v.toFound = append(v.toFound, toFound)
	v.sentToFound = append(v.sentToFound, call+toFound)
	v.waited = append(v.waited, waited)
	v.again = append(v.again, again)
	v.misses += misses
}

// promote measures memory.promote's latency to visibility for another user (issue 33's
// figure): a user's agent writes a fact and promotes it, and another user's search of
// the namespace, sent the moment the promotion answers, must find the shared row. The
// promoted row commits and reaches the search index as any write does, so the search
// waits at the barrier for it; the baseline is that same path for a plain
// memory.set, found by its writer's own search, measured on the same fact a moment
// before its promotion.
func (r *runner) promote(ctx context.Context) (*ScenarioResult, error) {
	res := &ScenarioResult{
		Title: "memory.promote: visible to another user's search",
		Baseline: "the same fact's memory.set a moment before its promotion, found by its writer's own search " +
			"(commit→searchable through the same barrier)",
		Notes: []string{
			"each sample: " + promoteWriter + "'s agent sets a new key (ten made-up words), " + promoteWriter +
				"'s search for the value is sent when the set answers and repeated until it finds the row; then the key is promoted " +
				"(memory.promote) and " + promoteReader + "'s search for the value is sent when the promotion answers and repeated " +
				"until it finds the shared row (user _shared); both searches are the admin token's with user_id set, which reads " +
				"as that user's own token does",
			"answered→found is from the write's answer to the answer of the search that found it: the barrier's wait for " +
				"the write's seq plus the search; sent→found adds the write's own call",
			"the same search again is sent once more after the row was found: the search's own cost with nothing pending",
			"the namespace is append_only: writes are not judged against each other",
		},
	}
	ns := r.namespace("promote")
	if err := r.appendOnly(ctx, ns); err != nil {
		return nil, err
	}
	for _, conc := range r.levels(1) {
		name := fmt.Sprintf("concurrency=%d", conc)
		var set, prom visibility
		rngs := r.workerRands(conc)
		_, err := r.closedLoop(ctx, "set, promote and search "+name, conc, 2*r.opts.Duration, func(ctx context.Context, w, i int) error {
			return r.promoteSample(ctx, ns, i, rngs[w], &set, &prom)
		})
		if err != nil {
			return nil, err
		}
		for _, st := range []struct {
			stage      string
			loom, base []time.Duration
		}{
			{"write call (promote vs set)", prom.call, set.call},
			{"answered→found by " + promoteReader + "'s search (vs the set's by its writer's)", prom.toFound, set.toFound},
			{"sent→found", prom.sentToFound, set.sentToFound},
			{"barrier wait of the search that found it", prom.waited, set.waited},
			{"the same search again, nothing pending", prom.again, set.again},
		} {
			l, b := summarize(st.loom, 0), summarize(st.base, 0)
			res.add(name+", "+st.stage, "p50 ms", l.P50MS, b.P50MS)
			res.add(name+", "+st.stage, "p99 ms", l.P99MS, b.P99MS)
		}
		res.Notes = append(res.Notes, fmt.Sprintf("%s: %d promotions and %d sets watched; searches sent after the answer that missed the row: "+
			"%d after a promotion, %d after a set (the barrier makes every write visible to the first search sent after its answer)",
			name, len(prom.call), len(set.call), prom.misses, set.misses))
	}
	return res, nil
}

// promoteSample sets key i as the writer, waits until the writer's search finds it,
// promotes it, and waits until the other user's search finds the shared row.
func (r *runner) promoteSample(ctx context.Context, ns string, i int, rng *rand.Rand, set, prom *visibility) error {
	key, value := fmt.Sprintf("p%d", i), sentence(rng)
	writer := client.Identity{Agent: promoteAgent, UserID: promoteWriter}
	start := time.Now()
	if _, err := r.api.Set(ctx, ns, key, client.SetRequest{Value: value, Identity: writer}); err != nil {
		return err
	}
	call := time.Since(start)
	if err := r.watchVisible(ctx, ns, key, value, promoteWriter, promoteWriter, call, set); err != nil {
		return fmt.Errorf("the set of %s: %w", key, err)
	}
	start = time.Now()
	if _, err := r.api.Promote(ctx, ns, key, writer); err != nil {
		return err
	}
	call = time.Since(start)
	if err := r.watchVisible(ctx, ns, key, value, promoteReader, client.SharedUser, call, prom); err != nil {
		return fmt.Errorf("the promotion of %s: %w", key, err)
	}
	return nil
}

// watchVisible searches ns for value as user reader from now (the write's answer)
// until a hit of key held by owner is found, then once more, and records the sample.
func (r *runner) watchVisible(ctx context.Context, ns, key, value, reader, owner string, call time.Duration, into *visibility) error {
	answered := time.Now()
	ctx, cancel := context.WithTimeout(ctx, lagTimeout)
	defer cancel()
	req := client.SearchRequest{Query: value, TopK: 5, UserID: reader}
	found := func() (bool, time.Duration, error) {
		ans, err := r.api.Search(ctx, ns, req)
		if err != nil {
			return false, 0, err
		}
		for _, h := range ans.Hits {
			if h.MemoryKey == key && h.UserID == owner {
				return true, time.Duration(ans.Barrier.WaitedMS) * time.Millisecond, nil
			}
		}
		return false, 0, nil
	}
	misses := 0
	for {
		ok, waited, err := found()
		if err != nil {
			return err
		}
		if ok {
			toFound := time.Since(answered)
			again := time.Now()
			if ok, _, err := found(); err != nil || !ok {
				return fmt.Errorf("%s's second search lost the row (found: %v): %w", reader, ok, err)
			}
			into.add(call, toFound, waited, time.Since(again), misses)
			return nil
		}
		misses++
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s's search did not find %s's row of %s after %s: %w", reader, owner, key, lagTimeout, ctx.Err())
		case <-time.After(lagPoll):
		}
	}
}
