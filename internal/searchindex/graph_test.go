package searchindex

import (
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/hnsw"
)

// recallAt is the share of the exact top k the approximate top k holds.
func recallAt(exact, approx []Hit, k int) float64 {
	want := map[string]bool{}
	for _, h := range exact[:min(k, len(exact))] {
		want[h.MemoryKey] = true
	}
	got := 0
	for _, h := range approx[:min(k, len(approx))] {
		if want[h.MemoryKey] {
			got++
		}
	}
	return float64(got) / float64(len(want))
}

// graphIndexes returns the same corpus in an index that searches its graph and in one
// that only scans.
func graphIndexes(t testing.TB, n int) (graphed, exact *Index, revs []*Revision) {
	revs = corpus(n, 7)
	graphed = New(Config{GraphMin: n / 2, ExactMax: 1})
	exact = New(Config{GraphMin: 1 << 30})
	start := time.Now()
	for i := 0; i < n; i += 1000 {
		batch := records(revs[i:min(i+1000, n)])
		graphed.Apply(ns, batch)
		exact.Apply(ns, batch)
	}
	graphed.Settle()
	t.Logf("%d documents applied and graphed in %s", n, time.Since(start).Round(time.Millisecond))
	if st := graphed.Stats(); st.Spaces[0].Graph == 0 {
		t.Fatal("no graph was built")
	}
	return graphed, exact, revs
}

// The graph finds what the exact scan finds: recall@10 and @200 (a leg's pool) against
// the exact scan of the same codes, unfiltered and under a filter keeping an eighth.
func TestGraphAgreesWithTheExactScan(t *testing.T) {
	graphed, exact, _ := graphIndexes(t, 20000)
	// The budget: at most 1 KiB per 384-dimension memory, postings and filter
	// columns included, with a graph and without one.
	for name, x := range map[string]*Index{"graphed": graphed, "exact": exact} {
		per := x.Stats().Bytes / 20000
		t.Logf("%s: %d bytes per memory", name, per)
		if per > 1024 {
			t.Errorf("%s: %d bytes per memory, over 1 KiB", name, per)
		}
	}
	rng := rand.New(rand.NewSource(99))
	for _, c := range []struct {
		name   string
		filter Filter
		floor  float64
	}{
		{"unfiltered", served(), 0.85},
		{"one user", Filter{UserID: "u3", Statuses: []string{"active"}, Now: now}, 0.85},
	} {
		var r10, r200 float64
		const queries = 100
		for i := 0; i < queries; i++ {
			q := Query{Filter: c.filter, Vector: queryVector(sentence(rng)), Limit: 200}
			g, _, _ := graphed.Search(ns, q)
			e, _, _ := exact.Search(ns, q)
			r10 += recallAt(e.Vector, g.Vector, 10)
			r200 += recallAt(e.Vector, g.Vector, 200)
		}
		r10, r200 = r10/queries, r200/queries
		t.Logf("%s: recall@10 %.3f, recall@200 %.3f", c.name, r10, r200)
		if r10 < c.floor || r200 < c.floor-0.1 {
			t.Errorf("%s: recall@10 %.3f, recall@200 %.3f below the floor %.2f", c.name, r10, r200, c.floor)
		}
	}
}

// Rows written after the graph (its tail) and rows that died since are searched right:
// the tail is found, the dead are never returned.
func TestGraphServesItsTailAndSkipsTheDead(t *testing.T) {
	graphed, _, revs := graphIndexes(t, 4000)
	// Rewrite one document: its old node dies, its new row is in the tail.
	moved := *revs[10]
	moved.Seq, moved.Version = 4001, 1<<40
	moved.Text, moved.ContentSHA256 = "a completely different sentence about quantum gardening", shaOf("quantum")
	moved.Vector = queryVector(moved.Text)
	graphed.Apply(ns, []Record{{Seq: 4001, Revision: &moved}})
	legs, _, _ := graphed.Search(ns, Query{Filter: served(), Vector: moved.Vector, Limit: 5})
	if len(legs.Vector) == 0 || legs.Vector[0].MemoryKey != moved.MemoryKey || legs.Vector[0].ContentSHA256 != moved.ContentSHA256 {
		t.Fatalf("the tail's row is not found first: %+v", legs.Vector)
	}
	legs, _, _ = graphed.Search(ns, Query{Filter: served(), Vector: revs[10].Vector, Limit: 50})
	for _, h := range legs.Vector {
		if h.ContentSHA256 == revs[10].ContentSHA256 && h.MemoryKey == revs[10].MemoryKey {
			t.Fatalf("a dead node was returned: %+v", h)
		}
	}
}

// The int8 codes rank as float32 vectors do: recall@10 of the exact scan of the codes
// against a float32 scan of the original vectors.
func TestQuantisedScanAgreesWithFloat32(t *testing.T) {
	revs := corpus(10000, 3)
	x := New(Config{GraphMin: 1 << 30})
	x.Apply(ns, records(revs))
	m := bareMatrix(revs)
	rng := rand.New(rand.NewSource(4))
	recall, worst := 0.0, 0.0
	for i := 0; i < 100; i++ {
		q := queryVector(sentence(rng))
		want := bareScan(m, q, 10)
		exact := make([]Hit, 0, 10)
		for _, c := range sortedCands(want) {
			exact = append(exact, Hit{Identity: Identity{MemoryKey: revs[c.Node].MemoryKey}, Score: float64(c.Sim)})
		}
		legs, _, _ := x.Search(ns, Query{Filter: served(), Vector: q, Limit: 10})
		recall += recallAt(exact, legs.Vector, 10)
		worst = max(worst, abs(legs.Vector[0].Score-exact[0].Score))
	}
	t.Logf("int8 against float32: recall@10 %.3f, top score off by at most %.4f", recall/100, worst)
	if recall/100 < 0.9 || worst > 0.01 {
		t.Fatalf("recall@10 %.3f, top score off by %.4f", recall/100, worst)
	}
}

func sortedCands(cs []hnsw.Cand) []hnsw.Cand {
	out := append([]hnsw.Cand(nil), cs...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Sim > out[j-1].Sim; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// A graph the rows written past it outgrew is extended by them, not rebuilt: its nodes
// keep their numbers, the new rows join it, and it finds what the exact scan finds as
// a graph built in one go does.
func TestAnExtendedGraphAgreesWithTheExactScan(t *testing.T) {
	const n = 20000
	revs := corpus(n, 11)
	graphed := New(Config{GraphMin: n / 2, ExactMax: 1})
	exact := New(Config{GraphMin: 1 << 30})
	apply := func(revs []*Revision) {
		for i := 0; i < len(revs); i += 1000 {
			batch := records(revs[i:min(i+1000, len(revs))])
			graphed.Apply(ns, batch)
			exact.Apply(ns, batch)
		}
	}
	graphOf := func() *hnsw.Graph {
		s := graphed.space(ns, false)
		s.mu.RLock()
		defer s.mu.RUnlock()
		for _, a := range s.arenas {
			return a.graph
		}
		return nil
	}
	apply(revs[:n/2])
	graphed.Settle()
	first := graphOf()
	if first == nil || first.Nodes() != n/2 {
		t.Fatalf("the first build: %v", first)
	}
	apply(revs[n/2:])
	graphed.Settle()
	g := graphOf()
	if g == first || g.Nodes() < n-1000 {
		t.Fatalf("after the second half the graph holds %d nodes, want at least %d", g.Nodes(), n-1000)
	}
	s := graphed.space(ns, false)
	s.mu.RLock()
	extended, built := s.extended, s.built
	s.mu.RUnlock()
	if extended == 0 || extended != built-1 || !slices.Equal(g.Rows()[:first.Nodes()], first.Rows()) {
		t.Fatalf("%d builds after the first, %d of them extensions: the graph was rebuilt, not extended", built-1, extended)
	}
	rng := rand.New(rand.NewSource(5))
	var r10, r200 float64
	const queries = 100
	for i := 0; i < queries; i++ {
		q := Query{Filter: served(), Vector: queryVector(sentence(rng)), Limit: 200}
		gl, _, _ := graphed.Search(ns, q)
		el, _, _ := exact.Search(ns, q)
		r10 += recallAt(el.Vector, gl.Vector, 10)
		r200 += recallAt(el.Vector, gl.Vector, 200)
	}
	r10, r200 = r10/queries, r200/queries
	t.Logf("extended from %d to %d nodes: recall@10 %.3f, recall@200 %.3f", first.Nodes(), g.Nodes(), r10, r200)
	if r10 < 0.85 || r200 < 0.75 {
		t.Errorf("recall@10 %.3f, recall@200 %.3f below the floors 0.85 and 0.75", r10, r200)
	}
}
