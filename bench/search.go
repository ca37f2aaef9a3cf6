package bench

import (
	"context"
	"fmt"
	"strings"

	"github.com/loomplane/loom/client"
)

// searchTopK is the search size the scenario asks for.
const searchTopK = 10

// queryPool is how many distinct queries a search run draws from; both sides draw
// from the same ones.
const queryPool = 200

// search measures memory.search (barrier, query embedding, vector and lexical legs,
// fusion, validation against the Postgres heads) in namespaces of each size, beside
// the bare ClickHouse vector scan of the same rows.
func (r *runner) search(ctx context.Context) (*ScenarioResult, error) {
	res := &ScenarioResult{
		Title: fmt.Sprintf("memory.search latency, top_k %d", searchTopK),
		Baseline: fmt.Sprintf("the bare ClickHouse vector scan of the same rows: the dot product of every row of the namespace "+
			"in loom.memory_embeddings with the query vector, top %d, without FINAL, filters or the other legs; "+
			"query vectors are embedded before the clock starts", searchTopK),
		Notes: []string{"each namespace is loaded with memory.bulk_set in an append_only namespace (unjudged, which only speeds the load); " +
			"queries are 4 words of the values' vocabulary, so the lexical legs find matches too"},
	}
	queries := make([]string, queryPool)
	for i := range queries {
		queries[i] = strings.Join(strings.Fields(sentence(r.rng))[:4], " ")
	}
	vectors, err := r.t.Process.Embedder.Embed(ctx, queries)
	if err != nil {
		return nil, fmt.Errorf("embed the queries: %w", err)
	}
	conn := r.t.Process.CH
	scan := fmt.Sprintf(`SELECT memory_key, %s AS score FROM loom.memory_embeddings
		PREWHERE org = ? AND namespace = ? ORDER BY score DESC LIMIT %d`, conn.Caps.Dot("embedding"), searchTopK)
	for _, size := range r.opts.SearchSizes {
		ns := r.namespace("search", fmt.Sprint(size))
		if err := r.appendOnly(ctx, ns); err != nil {
			return nil, err
		}
		if err := r.load(ctx, ns, size); err != nil {
			return nil, err
		}
		var warm *client.SearchAnswer
		for _, q := range queries[:3] {
			var err error
			if warm, err = r.api.Search(ctx, ns, client.SearchRequest{Query: q, TopK: searchTopK}); err != nil {
				return nil, fmt.Errorf("warm-up search of %s: %w", ns, err)
			}
		}
		if len(warm.Hits) == 0 {
			return nil, fmt.Errorf("a search of %d memories found nothing: the scenario would measure empty answers", size)
		}
		for _, conc := range r.levels(5) {
			name := fmt.Sprintf("%d memories, concurrency=%d", size, conc)
			rands := r.workerRands(conc)
			loom, err := r.closedLoop(ctx, "memory.search "+name, conc, r.opts.Duration, func(ctx context.Context, w, _ int) error {
				q := queries[rands[w].IntN(len(queries))]
				_, err := r.api.Search(ctx, ns, client.SearchRequest{Query: q, TopK: searchTopK})
				return err
			})
			if err != nil {
				return nil, err
			}
			base, err := r.closedLoop(ctx, "bare vector scan "+name, conc, r.opts.Duration, func(ctx context.Context, w, _ int) error {
				return scanAll(ctx, conn, scan, vectors[rands[w].IntN(len(vectors))], r.t.Org, ns)
			})
			if err != nil {
				return nil, err
			}
			res.compare(name, loom, base, "searches/s")
		}
	}
	return res, nil
}
