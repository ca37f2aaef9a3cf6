package index

import (
	"container/heap"
	"math"
	"slices"
	"sort"

	"github.com/loomplane/loom/internal/text"
)

// Candidate is a chunk a search found, with its legs' scores and its fused score.
type Candidate struct {
	*Chunk
	Score   float64 // reciprocal rank fusion of the legs
	Lexical float64 // BM25; 0 when the lexical leg missed it
	Vector  float64 // cosine; 0 when no vector
}

// rrfK is the reciprocal rank fusion constant.
const rrfK = 60

// scored is a chunk's score in one leg.
type scored struct {
	c *Chunk
	s float64
}

// before orders a leg: the higher score first, ties by source and ordinal, so a
// ranking does not depend on the sources map's order.
func (a scored) before(b scored) bool {
	if a.s != b.s {
		return a.s > b.s
	}
	return chunkBefore(a.c, b.c)
}

func chunkBefore(a, b *Chunk) bool {
	if a.SourceURI != b.SourceURI {
		return a.SourceURI < b.SourceURI
	}
	return a.Ordinal < b.Ordinal
}

func cmpScored(a, b scored) int {
	switch {
	case a.before(b):
		return -1
	case b.before(a):
		return 1
	}
	return 0
}

// legs is a search's scratch: every chunk each leg ranks, and the lexical leg's
// scores by slot, reused across searches so scoring 100k chunks allocates nothing per
// chunk.
type legs struct {
	lex, vec []scored
	acc      []float64
	touched  []int32
}

// Search answers up to depth candidates of a namespace: the lexical leg (BM25 over the
// query's terms) and the vector leg (cosine to vec, when given), fused by reciprocal
// rank. Deleted sources' chunks are left out here too; the heads are the authority.
//
// It answers what fusing the legs' full rankings would, without sorting them: the
// lexical leg reads only the postings of the query's terms, and each leg keeps its top
// 2·depth+rrfK in a bounded heap. A chunk below that in both legs fuses to at most
// 2/(rrfK+keep+1), less than the 1/(rrfK+depth) of each of a leg's first depth chunks,
// so the answer is among the kept ones; a kept chunk's rank in the other leg is counted
// exactly (one pass over that leg). Past GraphMin vectors the vector leg is the HNSW
// graph's pool instead (vectorLeg): its best chunks are found approximately, and a chunk
// the lexical leg kept is ranked within that pool.
func (x *Index) Search(org, ns, query string, vec []float32, f Filter, depth int) []Candidate {
	x.mu.RLock()
	defer x.mu.RUnlock()
	s := x.spaces[[2]string{org, ns}]
	if s == nil || s.chunks == 0 || depth <= 0 {
		return nil
	}
	sc := newScorer(s, text.Terms(query), vec)
	l, _ := x.scratch.Get().(*legs)
	if l == nil {
		l = &legs{}
	}
	defer x.scratch.Put(l)
	keep := 2*depth + rrfK
	sc.lexicalLeg(s, f, l)
	l.vec = l.vec[:0]
	if len(vec) > 0 {
		l.vec = x.vectorLeg(sc, s, f, keep, l.vec)
	}
	lexTop, vecTop := top(l.lex, keep), top(l.vec, keep)

	// ranks of the kept chunks: [lexical, vector], -1 where that leg does not rank it
	ranks := make(map[*Chunk]*[2]int, len(lexTop)+len(vecTop))
	kept := make([]*Chunk, 0, len(lexTop)+len(vecTop))
	for leg, ranked := range [2][]scored{lexTop, vecTop} {
		for r, e := range ranked {
			rk := ranks[e.c]
			if rk == nil {
				rk = &[2]int{-1, -1}
				ranks[e.c] = rk
				kept = append(kept, e.c)
			}
			rk[leg] = r
		}
	}
	// a chunk kept by one leg and ranked below the kept ones in the other
	var lexRest, vecRest []scored
	for _, c := range kept {
		rk := ranks[c]
		if rk[0] < 0 && len(lexTop) == keep {
			if v := sc.lexical(c); v > 0 {
				lexRest = append(lexRest, scored{c, v})
			}
		}
		if rk[1] < 0 && len(vecTop) == keep {
			if v, ok := sc.vector(c); ok && v > 0 {
				vecRest = append(vecRest, scored{c, v})
			}
		}
	}
	for leg, rest := range [2][]scored{lexRest, vecRest} {
		counted := rankIn([2][]scored{l.lex, l.vec}[leg], rest)
		for i, e := range rest {
			ranks[e.c][leg] = counted[i]
		}
	}

	out := make([]Candidate, 0, len(kept))
	for _, c := range kept {
		rk := ranks[c]
		cand := Candidate{Chunk: c, Lexical: sc.lexical(c)}
		cand.Vector, _ = sc.vector(c)
		if rk[0] >= 0 {
			cand.Score += 1 / float64(rrfK+rk[0]+1)
		}
		if rk[1] >= 0 {
			cand.Score += 1 / float64(rrfK+rk[1]+1)
		}
		out = append(out, cand)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return chunkBefore(out[i].Chunk, out[j].Chunk)
	})
	if len(out) > depth {
		out = out[:depth]
	}
	return out
}

// scorer scores a namespace's chunks for one query.
type scorer struct {
	terms []string
	idf   []float64 // by terms' index
	avg   float64
	vec   []float32
}

func newScorer(s *space, terms []string, vec []float32) *scorer {
	sc := &scorer{terms: terms, idf: make([]float64, len(terms)), avg: float64(s.totalLen) / float64(max(s.chunks, 1)), vec: vec}
	for i, t := range terms {
		df := float64(s.df[t])
		sc.idf[i] = math.Log(1 + (float64(s.chunks)-df+0.5)/(df+0.5))
	}
	return sc
}

// lexical is c's BM25 over the query's terms (Okapi, k1 1.2, b 0.75).
func (sc *scorer) lexical(c *Chunk) float64 {
	var lex float64
	for i, t := range sc.terms {
		tf := float64(c.tfs[t])
		if tf == 0 {
			continue
		}
		idf := sc.idf[i]
		const k1, b = 1.2, 0.75
		lex += idf * tf * (k1 + 1) / (tf + k1*(1-b+b*float64(c.length)/max(sc.avg, 1)))
	}
	return lex
}

// vector is c's dot product with the query's vector (both unit length: the cosine);
// false when c has no vector of the query's size.
func (sc *scorer) vector(c *Chunk) (float64, bool) {
	if len(sc.vec) == 0 || len(sc.vec) != len(c.vec) {
		return 0, false
	}
	var dot float32
	cv := c.vec[:len(sc.vec)] // one bounds check, not one an entry
	for i, q := range sc.vec {
		dot += q * cv[i] // in order: the scores stay those of the full sort
	}
	return float64(dot), true
}

func searchable(c *Chunk, f Filter) bool { return !c.gone && !c.src.deleted && f.match(c) }

// lexicalLeg sets l.lex to every searchable chunk holding a query term, with its BM25.
// It sums each slot's score posting by posting, in the query's term order as lexical
// does (the same sum, to the bit), reading only the postings and the slots' lengths;
// a chunk is read once, when its score is whole. Reading each posting's chunk and
// scoring it term by term through its term map was most of a search's cost at 100k
// chunks, the query's terms being in most of them.
func (sc *scorer) lexicalLeg(s *space, f Filter, l *legs) {
	if cap(l.acc) < len(s.slots) {
		l.acc = make([]float64, len(s.slots))
	}
	acc, touched := l.acc[:len(s.slots)], l.touched[:0]
	avg := max(sc.avg, 1)
	for i, t := range sc.terms {
		p := s.post[t]
		if p == nil {
			continue
		}
		idf := sc.idf[i]
		for _, e := range p.entries {
			if s.slots[e.slot] == nil {
				continue
			}
			tf := float64(e.tf)
			const k1, b = 1.2, 0.75
			if acc[e.slot] == 0 {
				touched = append(touched, e.slot)
			}
			acc[e.slot] += idf * tf * (k1 + 1) / (tf + k1*(1-b+b*float64(s.lens[e.slot])/avg))
		}
	}
	// A touched slot's chunk is live (dropped ones were passed over above); with no
	// filter, its source's deletion is all there is to check, and s.deleted holds it by
	// slot: reading 100k chunks out of the cache was a fifth of a search at 100k chunks.
	into, all := l.lex[:0], f.all()
	for _, slot := range touched {
		if c := s.slots[slot]; all && !s.deleted[slot] || !all && searchable(c, f) {
			into = append(into, scored{c, acc[slot]})
		}
		acc[slot] = 0
	}
	l.lex, l.touched = into, touched
}

// vectorLeg appends the chunks with a positive cosine to the query's vector to into:
// every one (an exact scan), or past GraphMin vectors the graph's pool of the best keep
// (graphLeg), unless f leaves too few chunks for the graph to find them.
func (x *Index) vectorLeg(sc *scorer, s *space, f Filter, keep int, into []scored) []scored {
	if a := s.arenas[len(sc.vec)]; a != nil && a.graph != nil {
		n := a.live()
		if !f.all() {
			n = eligible(s, f)
		}
		if n > x.cfg.ExactMax && n*graphFilterRatio >= a.graph.Nodes() {
			return sc.graphLeg(a, f, keep, n, x.cfg.EfSearch, into)
		}
	}
	all := f.all()
	for _, src := range s.sources {
		if src.deleted {
			continue
		}
		for _, c := range src.chunks {
			if !all && !f.match(c) {
				continue
			}
			if v, ok := sc.vector(c); ok && v > 0 {
				into = append(into, scored{c, v})
			}
		}
	}
	return into
}

// worstFirst is a bounded heap of a leg's best entries, its worst at the root.
type worstFirst []scored

func (h worstFirst) Len() int           { return len(h) }
func (h worstFirst) Less(i, j int) bool { return h[j].before(h[i]) }
func (h worstFirst) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *worstFirst) Push(v any)        { *h = append(*h, v.(scored)) }
func (h *worstFirst) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

// top is leg's first n entries in rank order.
func top(leg []scored, n int) []scored {
	h := make(worstFirst, 0, min(n, len(leg)))
	for _, e := range leg {
		switch {
		case len(h) < n:
			heap.Push(&h, e)
		case e.before(h[0]):
			h[0] = e
			heap.Fix(&h, 0)
		}
	}
	slices.SortFunc(h, cmpScored)
	return h
}

// rankIn counts, for each of qs (entries of leg), how many of leg's entries rank
// before it: qs is sorted, then each entry of leg adds one to the qs from the first
// it ranks before on. That first is found by score alone, then among the qs of the
// entry's own score by source and ordinal: a leg of most of the namespace's chunks
// has many equal scores (BM25 of equal lengths and counts), and comparing sources at
// every step of the search was a third of a search's CPU at 100k chunks.
func rankIn(leg, qs []scored) []int {
	if len(qs) == 0 {
		return nil
	}
	order := make([]int, len(qs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmpScored(qs[a], qs[b]) })
	scores := make([]float64, len(order)) // by rank: descending
	for i, q := range order {
		scores[i] = qs[q].s
	}
	from := make([]int, len(qs)+1)
	for _, e := range leg {
		// the first of lower score than e's: e ranks before it and all after it
		lo, hi := 0, len(scores)
		for lo < hi {
			if m := int(uint(lo+hi) >> 1); scores[m] < e.s {
				hi = m
			} else {
				lo = m + 1
			}
		}
		// the qs of e's score before it, in source and ordinal order: e ranks before
		// those it precedes, the last of them
		for lo > 0 && scores[lo-1] == e.s && chunkBefore(e.c, qs[order[lo-1]].c) {
			lo--
		}
		from[lo]++
	}
	out := make([]int, len(qs))
	n := 0
	for i, q := range order {
		n += from[i]
		out[q] = n
	}
	return out
}
