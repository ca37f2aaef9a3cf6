package index

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/loomplane/loom/events"
)

// rankIn's count of a leg's entries ranking before each of qs is the one comparing
// every entry with every q, when most scores are equal (a few values, as BM25 gives
// chunks of equal lengths and counts) and ties break by source and ordinal.
func TestRankInCountsAsComparingEveryEntry(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for round := range 200 {
		n := 1 + rng.IntN(300)
		leg := make([]scored, n)
		for i := range leg {
			leg[i] = scored{&Chunk{SourceURI: fmt.Sprintf("s/%03d", rng.IntN(40)), Ordinal: rng.IntN(4)}, float64(rng.IntN(6)) / 4}
		}
		var qs []scored
		for _, e := range leg {
			if rng.IntN(5) == 0 {
				qs = append(qs, e)
			}
		}
		for range rng.IntN(4) { // and a few entries the leg does not hold
			qs = append(qs, scored{&Chunk{SourceURI: fmt.Sprintf("s/%03d", rng.IntN(40)), Ordinal: rng.IntN(4)}, float64(rng.IntN(6)) / 4})
		}
		got := rankIn(leg, qs)
		for i, q := range qs {
			want := 0
			for _, e := range leg {
				if e.before(q) {
					want++
				}
			}
			if got[i] != want {
				t.Fatalf("round %d: %d entries of %d rank before %v (%s#%d), rankIn counted %d", round, want, n, q.s, q.c.SourceURI, q.c.Ordinal, got[i])
			}
		}
	}
}

// BenchmarkFusedSearch is a search of both legs at 100k chunks, as knowledge.search
// makes one past GraphMin: four-word queries of the skewed vocabulary (the first words
// in most chunks, as the bench's generated corpus has), each with a vector walked in
// the graph, at the default pool depth. The vectors have 16 dimensions so that the
// graph builds in seconds: the lexical leg and the fusion are what it measures.
func BenchmarkFusedSearch(b *testing.B) {
	c := newCorpus(7, 16)
	x := New(Config{GraphMin: 1, ExactMax: 1})
	defer x.Close()
	x.apply(c.ops(100000))
	x.Settle()
	type query struct {
		text string
		vec  []float32
	}
	queries := make([]query, 64)
	for i := range queries {
		queries[i] = query{c.phrase(4), c.vector()}
	}
	b.ReportAllocs()
	start, i := cpuTime(), 0
	for b.Loop() {
		q := queries[i%len(queries)]
		x.Search("o", "n", q.text, q.vec, Filter{}, 20)
		i++
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// Deleted sources keep their slots, and the unfiltered lexical leg reads their deletion
// by slot: through a renumbering (the other sources rewritten twice) and a restore after
// it, searches answer as the full sort does, which reads each chunk's source.
func TestDeletionsFollowTheirSlotsThroughARenumbering(t *testing.T) {
	c := newCorpus(33, 16)
	x := c.build(3000)
	seq := x.Position("o", "n")
	written := seq
	var deletes []op
	for i := int64(1); i <= written; i += 4 {
		seq++
		deletes = append(deletes, flip(seq, sourceURI(i), events.TypeDocumentDeleted))
	}
	churn, seq := c.rewriteTwice(seq, written, func(i int64) bool { return i%4 != 1 })
	churn = append(deletes, churn...)
	x.apply(churn)
	renumberedAndMatchingTheFullSort(t, c, x)
	x.apply([]op{flip(seq+1, sourceURI(5), events.TypeDocumentRestored), flip(seq+2, sourceURI(9), events.TypeDocumentRestored)})
	if checked := matchesTheFullSort(t, c, x); checked < 1000 {
		t.Fatalf("only %d candidates compared after the restores", checked)
	}
}
