package bench

import (
	"context"
	"fmt"
	"strings"

	"github.com/loomplane/loom/client"
)

// packBudget is the token budget the pack scenario's blocks are cut to.
const packBudget = 1000

// pack measures context.pack (a search behind the barrier, the journal's recent
// revisions, the cut to a budget counted with a tokenizer, the rendering) against
// memory.search alone of the same queries in the same namespace, same run: the issue's
// target is a pack within twice a search's p50.
func (r *runner) pack(ctx context.Context) (*ScenarioResult, error) {
	size := r.opts.SearchSizes[0]
	res := &ScenarioResult{
		Title:    fmt.Sprintf("context.pack latency, %d-token budget (o200k_base), at %d memories and %d turns", packBudget, size, r.opts.PackTurns),
		Baseline: fmt.Sprintf("memory.search of the same queries, top_k %d, same namespace, same concurrency, same run", packTopK),
		Notes: []string{"the namespace is loaded with memory.bulk_set (append_only), then --pack-turns turns of one user with memory.observe " +
			"(sessions of 100); the pack names the last session, so its facts (the search of the query, as the baseline runs it: the " +
			"evidence legs are off by default in both), recent (the journal's newest revisions) and session (the session's digest and " +
			"last 8 turns) layers hold lines, and its knowledge layer searches an empty plane; no profile is loaded (no user_id). " +
			"The layers are read at once, so a pack costs its slowest layer, the search",
			fmt.Sprintf("the namespace size is --search-sizes' first (%d)", size), tripsNote},
	}
	ns := r.namespace("pack", fmt.Sprint(size))
	if err := r.appendOnly(ctx, ns); err != nil {
		return nil, err
	}
	if _, err := r.loadValues(ctx, ns, size); err != nil {
		return nil, err
	}
	turns, err := r.observeSessions(ctx, ns, r.opts.PackTurns)
	if err != nil {
		return nil, err
	}
	if _, err := r.t.Process.PG.Exec(ctx, `ANALYZE loom.memory_evidence`); err != nil {
		return nil, fmt.Errorf("analyzing the turns' table: %w", err)
	}
	session := fmt.Sprintf("s%04d", (len(turns)-1)/recallSessionTurns)
	if _, err := r.settleIndex(ctx, ns); err != nil {
		return nil, err
	}
	queries := make([]string, queryPool)
	for i := range queries {
		queries[i] = strings.Join(strings.Fields(sentence(r.rng))[:4], " ")
	}
	budget, topK := packBudget, packTopK
	packOf := func(q string) client.PackRequest {
		return client.PackRequest{Query: q, SessionID: session, BudgetTokens: &budget, TopK: &topK}
	}
	for _, q := range queries[:3] {
		a, err := r.api.Pack(ctx, ns, packOf(q))
		if err != nil {
			return nil, fmt.Errorf("warm-up pack of %s: %w", ns, err)
		}
		if a.Block == "" || !strings.Contains(a.Block, "[t:") {
			return nil, fmt.Errorf("a pack of %d memories and %d turns holds no turn: the scenario would measure another pack", size, len(turns))
		}
	}
	for _, conc := range r.levels(1, 5) {
		name := fmt.Sprintf("%d memories, concurrency=%d", size, conc)
		rands := r.workerRands(conc)
		loomTrips := r.tripsMark()
		loom, err := r.closedLoop(ctx, "context.pack "+name, conc, r.opts.Duration, func(ctx context.Context, w, _ int) error {
			_, err := r.api.Pack(ctx, ns, packOf(queries[rands[w].IntN(len(queries))]))
			return err
		})
		if err != nil {
			return nil, err
		}
		loomTrips = loomTrips.stop()
		baseTrips := r.tripsMark()
		base, err := r.closedLoop(ctx, "memory.search "+name, conc, r.opts.Duration, func(ctx context.Context, w, _ int) error {
			_, err := r.api.Search(ctx, ns, client.SearchRequest{Query: queries[rands[w].IntN(len(queries))], TopK: packTopK})
			return err
		})
		if err != nil {
			return nil, err
		}
		res.compare(name, loom, base, "calls/s")
		res.addTrips(name, loomTrips, loom, baseTrips, base)
	}
	return res, nil
}

// packTopK is the facts a pack searches for, and the baseline search's top_k.
const packTopK = 10
