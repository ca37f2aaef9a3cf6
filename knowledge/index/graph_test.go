package index

import (
	"fmt"
	"testing"

	"github.com/loomplane/loom/events"
)

// graphed returns the same chunks in an index that walks its graph and in one that
// scans exactly, the graph built.
func graphed(t *testing.T, c *corpus, ops []op) (graph, exact *Index) {
	graph, exact = New(Config{GraphMin: 2000, ExactMax: 1}), New(Config{GraphMin: 1 << 30})
	t.Cleanup(graph.Close)
	graph.apply(ops)
	exact.apply(ops)
	graph.Settle()
	if a := graph.spaces[[2]string{"o", "n"}].arenas[c.dim]; a == nil || a.graph == nil {
		t.Fatal("no graph was built")
	}
	return graph, exact
}

func chunkAt(c Candidate) string { return fmt.Sprintf("%s#%d", c.SourceURI, c.Ordinal) }

// recall is the share of want's chunks got holds.
func recall(want, got []Candidate) float64 {
	held := map[string]bool{}
	for _, g := range got {
		held[chunkAt(g)] = true
	}
	n := 0
	for _, w := range want {
		if held[chunkAt(w)] {
			n++
		}
	}
	return float64(n) / float64(max(len(want), 1))
}

// Past GraphMin the vector leg walks the graph and finds what the exact scan finds
// (recall@10 of the vector leg alone, filters included), with the same scores.
func TestTheGraphFindsWhatTheExactScanFinds(t *testing.T) {
	c := newCorpus(5, 32)
	graph, exact := graphed(t, c, c.ops(8000))
	filters := []Filter{{}, {Formats: []string{"text", "pdf"}}, {Tags: []string{"policy"}}}
	sum, n := 0.0, 0
	for q := 0; q < 90; q++ {
		f, vec := filters[q%len(filters)], c.vector()
		want, got := exact.Search("o", "n", "", vec, f, 10), graph.Search("o", "n", "", vec, f, 10)
		sum += recall(want, got)
		n++
		for _, g := range got {
			if !f.match(g.Chunk) || g.src.deleted || g.gone {
				t.Fatalf("the graph answered a chunk the filter %+v refuses: %s", f, chunkAt(g))
			}
		}
		if len(got) > 0 && len(want) > 0 && chunkAt(got[0]) == chunkAt(want[0]) && got[0].Vector != want[0].Vector {
			t.Fatalf("the same chunk scored %v by the graph, %v exactly", got[0].Vector, want[0].Vector)
		}
	}
	t.Logf("recall@10 of the vector leg: %.3f", sum/float64(n))
	if sum/float64(n) < 0.9 {
		t.Fatalf("recall@10 %.3f", sum/float64(n))
	}
}

// Chunks written after the graph was built are found (the tail is scanned beside it);
// a deleted source's chunks and a replaced version's are walked through, never answered.
func TestTheGraphServesNewChunksAndNotDroppedOnes(t *testing.T) {
	c := newCorpus(6, 32)
	ops := c.ops(6000)
	graph, _ := graphed(t, c, ops)
	seq := graph.Position("o", "n")
	fresh := c.document(seq+1, seq+1, "new/1.txt", 3, nil)
	replaced, deleted := ops[10].content, ops[20].content
	graph.apply([]op{fresh,
		c.document(seq+2, seq+100000, replaced.SourceURI, 2, nil),
		flip(seq+3, deleted.SourceURI, events.TypeDocumentDeleted)})
	if a := graph.spaces[[2]string{"o", "n"}].arenas[c.dim]; a.graph.Limit() > a.rows()-5 {
		t.Fatalf("the new chunks are not past the graph: limit %d of %d rows", a.graph.Limit(), a.rows())
	}
	for i, ch := range fresh.content.Chunks {
		if ch.Embedding == nil {
			continue
		}
		got := graph.Search("o", "n", "", ch.Embedding, Filter{}, 5)
		found := false
		for _, g := range got {
			found = found || (g.SourceURI == "new/1.txt" && g.Ordinal == i)
		}
		if !found {
			t.Fatalf("a chunk written after the build is not among its own vector's best: %v", got)
		}
	}
	for _, gone := range [][]events.DocumentChunk{replaced.Chunks, deleted.Chunks} {
		for _, ch := range gone {
			if ch.Embedding == nil {
				continue
			}
			for _, g := range graph.Search("o", "n", "", ch.Embedding, Filter{}, 5) {
				if g.gone || g.src.deleted || (g.SourceURI == replaced.SourceURI && g.Version != seq+100000) {
					t.Fatalf("a dropped chunk was answered: %s v%d", chunkAt(g), g.Version)
				}
			}
		}
	}
}
