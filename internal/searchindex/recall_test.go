package searchindex

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	benchcorpus "github.com/loomplane/loom/internal/corpus"
	"github.com/loomplane/loom/internal/embed"
)

// The vector leg at 100,000 memories of `loomd bench`'s search corpus (ten made-up
// words a value, corpus.Sentence), its graph against the exact scan of the same codes,
// over held-out queries: four words drawn with a seed no setting was tuned on (the
// bench's queries are drawn with another). It reports the vector leg's recall@10 and
// recall@200 (the leg's pool), and the time of a search's four legs, the vector leg's
// graph and its exact scan:
//
//	go test ./internal/searchindex -run '^$' -bench VectorLeg100k -benchtime 400x
//
// The bench's corpus is harder for a graph than corpus()'s sentences: its values share
// few words, so their vectors are near-orthogonal and the walk cannot lean on clusters.

const recallCorpus = 100000

var wordIndexes = sync.OnceValues(func() (graphed, exact *Index) {
	rng := rand.New(rand.NewPCG(recallCorpus, 1))
	texts := make([]string, recallCorpus)
	for i := range texts {
		texts[i] = benchcorpus.Sentence(rng)
	}
	vecs, _ := embed.NewHash(384).Embed(context.Background(), texts)
	graphed = New(Config{GraphMin: recallCorpus / 2})
	exact = New(Config{GraphMin: 1 << 30})
	t0 := time.Unix(1_700_000_000, 0).UTC()
	for from := 0; from < recallCorpus; from += 1000 {
		recs := make([]Record, 0, 1000)
		for i := from; i < from+1000; i++ {
			recs = append(recs, Record{Seq: int64(i + 1), Revision: &Revision{Seq: int64(i + 1), MemoryID: uuid.NewString(),
				Version: int64(i + 1), Agent: "-", UserID: "-", SessionID: "-", MemoryType: "fact", Status: "active",
				Sensitivity: "normal", ContentSHA256: shaOf(texts[i]), UpdatedAt: t0, EmbeddingDim: 384,
				MemoryKey: fmt.Sprintf("k%07d", i), Text: texts[i], Vector: vecs[i]}})
		}
		graphed.Apply(ns, recs)
		exact.Apply(ns, recs)
	}
	graphed.Settle()
	return graphed, exact
})

// heldOutQueries are n queries of four words, drawn apart from the bench's.
func heldOutQueries(n int) []Query {
	rng := rand.New(rand.NewPCG(9001, 2))
	out := make([]Query, n)
	for i := range out {
		q := strings.Join(strings.Fields(benchcorpus.Sentence(rng))[:4], " ")
		out[i] = Query{Filter: served(), Vector: queryVector(q), Text: q, Terms: terms(q), Limit: 200, K1: 1.2, B: 0.75}
	}
	return out
}

func BenchmarkVectorLeg100k(b *testing.B) {
	start := time.Now()
	graphed, exact := wordIndexes()
	b.Logf("%d memories applied and graphed in %s", recallCorpus, time.Since(start).Round(time.Millisecond))
	if st := graphed.Stats(); st.Spaces[0].Graph < recallCorpus*9/10 {
		b.Fatalf("the graph holds %d of %d", st.Spaces[0].Graph, recallCorpus)
	}
	queries := heldOutQueries(400)
	timed := func(x *Index) time.Duration {
		t := time.Now()
		for i := 0; i < b.N; i++ {
			x.Search(ns, queries[i%len(queries)])
		}
		return time.Since(t) / time.Duration(b.N)
	}
	b.ResetTimer()
	perGraph := timed(graphed)
	b.StopTimer()
	perExact := timed(exact)
	var r10, r200 float64
	for _, q := range queries {
		g, _, _ := graphed.Search(ns, q)
		e, _, _ := exact.Search(ns, q)
		r10 += recallAt(e.Vector, g.Vector, 10)
		r200 += recallAt(e.Vector, g.Vector, 200)
	}
	b.ReportMetric(r10/float64(len(queries)), "recall@10")
	b.ReportMetric(r200/float64(len(queries)), "recall@200")
	b.ReportMetric(float64(perGraph.Microseconds()), "graph-µs/search")
	b.ReportMetric(float64(perExact.Microseconds()), "exact-µs/search")
}
