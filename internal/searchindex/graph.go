package searchindex

import (
	"math"
	"math/rand"
	"slices"
	"sync"
)

// graph is a hierarchical navigable small world graph (Malkov & Yashunin) over an
// arena's value rows, as they were when it was built: nodes are numbered 0..n-1 and
// name their rows. Links are flat arrays of node numbers and similarities are int8 dot
// products, so a node costs its links, not a second copy of its vector. It is immutable
// once built; rows written after it (the tail) are scanned exactly beside it until an
// extension (a copy with them inserted) replaces it, and rows that died since are walked
// through but never returned.
type graph struct {
	m, m0  int
	rows   []int32 // node → arena row
	limit  int     // arena rows at the snapshot: rows at or past it are the tail
	links0 []uint32
	deg0   []uint8
	upper  map[uint32][][]uint32 // node → links at levels 1.. (the few nodes above level 0)
	entry  uint32
	top    int
	visits sync.Pool
}

// graphSource is a snapshot of an arena for a build: rows never change once written, so
// the slices are read without the namespace's lock.
type graphSource struct {
	dim    int
	codes  []int8
	scales []float32
	rows   []int32
	limit  int
	epoch  int
	// base, when set, is the installed graph the build extends: rows begins with its
	// rows, and only the rest are inserted, into a copy of its links.
	base *graph
}

func (g *graph) nodes() int { return len(g.rows) }

func (g *graph) bytes() int64 {
	b := 4*int64(cap(g.rows)) + 4*int64(cap(g.links0)) + int64(cap(g.deg0))
	for _, levels := range g.upper {
		b += 48 // the map entry and its slice header
		for _, l := range levels {
			b += 24 + 4*int64(cap(l))
		}
	}
	return b
}

func (g *graph) links(node uint32, level int) []uint32 {
	if level == 0 {
		return g.links0[int(node)*g.m0 : int(node)*g.m0+int(g.deg0[node])]
	}
	return g.upper[node][level-1]
}

// cand is a node and its similarity to what is searched.
type cand struct {
	node uint32
	sim  float32
}

// candHeap is a binary heap of candidates: a max-heap when max is set, else a min-heap.
type candHeap struct {
	items []cand
	max   bool
}

func (h *candHeap) less(i, j int) bool {
	if h.max {
		return h.items[i].sim > h.items[j].sim
	}
	return h.items[i].sim < h.items[j].sim
}

func (h *candHeap) push(c cand) {
	h.items = append(h.items, c)
	for i := len(h.items) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.items[i], h.items[p] = h.items[p], h.items[i]
		i = p
	}
}

func (h *candHeap) pop() cand {
	top := h.items[0]
	n := len(h.items) - 1
	h.items[0] = h.items[n]
	h.items = h.items[:n]
	for i := 0; ; {
		l, r, best := 2*i+1, 2*i+2, i
		if l < n && h.less(l, best) {
			best = l
		}
		if r < n && h.less(r, best) {
			best = r
		}
		if best == i {
			break
		}
		h.items[i], h.items[best] = h.items[best], h.items[i]
		i = best
	}
	return top
}

func (h *candHeap) len() int   { return len(h.items) }
func (h *candHeap) peek() cand { return h.items[0] }

// visitSet marks visited nodes with an epoch, so it is cleared in O(1).
type visitSet struct {
	marks []uint32
	epoch uint32
}

func (v *visitSet) reset(n int) {
	if len(v.marks) < n {
		v.marks = make([]uint32, n)
		v.epoch = 0
	}
	v.epoch++
	if v.epoch == 0 {
		clear(v.marks)
		v.epoch = 1
	}
}

func (v *visitSet) visit(n uint32) bool {
	if v.marks[n] == v.epoch {
		return false
	}
	v.marks[n] = v.epoch
	return true
}

// searcher walks a graph: sim scores a node against what is searched.
type searcher struct {
	g   *graph
	sim func(node uint32) float32
	// warm, when set, is given the nodes about to be scored, so that it can load what
	// sim will read of all of them at once: the rows of a large graph are in memory,
	// not in the cache, and a node scored after the other is a miss after the other.
	warm   func(nodes []uint32) int8
	warmed int8 // what warm read, kept so that its loads are not dropped
	next   []uint32
	visits *visitSet
	cands  candHeap
	found  candHeap
}

func (g *graph) searcher(sim func(uint32) float32) *searcher {
	v, _ := g.visits.Get().(*visitSet)
	if v == nil {
		v = &visitSet{}
	}
	v.reset(g.nodes())
	return &searcher{g: g, sim: sim, visits: v, cands: candHeap{max: true}}
}

func (s *searcher) release() { s.g.visits.Put(s.visits) }

// greedy descends one level: the neighbour nearest to what is searched, until none is nearer.
func (s *searcher) greedy(ep cand, level int) cand {
	for moved := true; moved; {
		moved = false
		for _, n := range s.g.links(ep.node, level) {
			if sim := s.sim(n); sim > ep.sim {
				ep, moved = cand{n, sim}, true
			}
		}
	}
	return ep
}

// layer searches one level from ep and returns the ef best nodes that accept takes
// (all nodes when accept is nil), best first. Nodes accept refuses are walked through.
// maxVisits bounds the walk when accept refuses most nodes.
func (s *searcher) layer(ep cand, ef, level int, accept func(uint32) bool, maxVisits int) []cand {
	s.visits.reset(s.g.nodes())
	s.cands.items, s.found.items = s.cands.items[:0], s.found.items[:0]
	s.visits.visit(ep.node)
	s.cands.push(ep)
	if accept == nil || accept(ep.node) {
		s.found.push(ep)
	}
	visits := 1
	for s.cands.len() > 0 {
		c := s.cands.pop()
		if s.found.len() >= ef && c.sim < s.found.peek().sim {
			break
		}
		if maxVisits > 0 && visits >= maxVisits {
			break
		}
		next := s.next[:0]
		for _, n := range s.g.links(c.node, level) {
			if s.visits.visit(n) {
				next = append(next, n)
			}
		}
		s.next = next
		if s.warm != nil {
			s.warmed += s.warm(next)
		}
		for _, n := range next {
			visits++
			sim := s.sim(n)
			if s.found.len() < ef || sim > s.found.peek().sim {
				s.cands.push(cand{n, sim})
				if accept == nil || accept(n) {
					s.found.push(cand{n, sim})
					if s.found.len() > ef {
						s.found.pop()
					}
				}
			}
		}
	}
	out := make([]cand, s.found.len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = s.found.pop()
	}
	return out
}

// rowWarmer is a searcher's warm for nodes whose rows (node → row, dim codes a row)
// lie in codes: it reads a byte of every cache line of the nodes' rows, loads that do
// not wait for each other, before the walk scores the nodes one after the other.
func rowWarmer(codes []int8, dim int, rows []int32) func([]uint32) int8 {
	return func(nodes []uint32) int8 {
		var sum int8
		for _, n := range nodes {
			row := codes[int(rows[n])*dim : int(rows[n]+1)*dim]
			for i := 0; i < len(row); i += 64 {
				sum += row[i]
			}
		}
		return sum
	}
}

// search returns up to ef nodes nearest what sim scores, that accept takes; warm, if
// set, is the searcher's.
func (g *graph) search(sim func(uint32) float32, warm func([]uint32) int8, ef int, accept func(uint32) bool, maxVisits int) []cand {
	if g.nodes() == 0 {
		return nil
	}
	s := g.searcher(sim)
	s.warm = warm
	defer s.release()
	ep := cand{g.entry, sim(g.entry)}
	for level := g.top; level > 0; level-- {
		ep = s.greedy(ep, level)
	}
	return s.layer(ep, ef, 0, accept, maxVisits)
}

// graphParams tune a build.
type graphParams struct {
	m, efConstruction int
	seed              int64
}

// buildGraph builds a graph of src's rows; stop is polled, and a stopped build returns nil.
func buildGraph(src graphSource, p graphParams, stop func() bool) *graph {
	n := len(src.rows)
	g := &graph{m: p.m, m0: 2 * p.m, rows: src.rows, limit: src.limit, upper: map[uint32][][]uint32{}}
	g.links0 = make([]uint32, n*g.m0)
	g.deg0 = make([]uint8, n)
	if n == 0 {
		return g
	}
	from := 0
	if b := src.base; b != nil {
		// Searches read the installed graph while this one is built: its links are
		// copied, never changed in place.
		from = b.nodes()
		copy(g.links0, b.links0)
		copy(g.deg0, b.deg0)
		for node, levels := range b.upper {
			cp := make([][]uint32, len(levels))
			for l, links := range levels {
				cp[l] = slices.Clone(links)
			}
			g.upper[node] = cp
		}
		g.entry, g.top = b.entry, b.top
	}
	row := func(node uint32) []int8 {
		r := int(src.rows[node])
		return src.codes[r*src.dim : (r+1)*src.dim]
	}
	scale := func(node uint32) float32 { return src.scales[src.rows[node]] }
	between := func(a, b uint32) float32 { return scale(a) * scale(b) * float32(dotCodes(row(a), row(b))) }
	warm := rowWarmer(src.codes, src.dim, src.rows)
	rng := rand.New(rand.NewSource(p.seed))
	ml := 1 / math.Log(float64(p.m))
	for i := from; i < n; i++ {
		if (i-from)%1024 == 0 && stop() {
			return nil
		}
		node := uint32(i)
		level := int(-math.Log(1-rng.Float64()) * ml)
		if level > 0 {
			g.upper[node] = make([][]uint32, level)
		}
		if i == 0 {
			g.entry, g.top = 0, level
			continue
		}
		q := row(node)
		qs := scale(node)
		s := g.searcher(func(o uint32) float32 { return qs * scale(o) * float32(dotCodes(q, row(o))) })
		s.warm = warm
		ep := cand{g.entry, s.sim(g.entry)}
		for l := g.top; l > level; l-- {
			ep = s.greedy(ep, l)
		}
		for l := min(level, g.top); l >= 0; l-- {
			found := s.layer(ep, p.efConstruction, l, nil, 0)
			chosen := selectNeighbours(found, p.m, between)
			degree := g.m
			if l == 0 {
				degree = g.m0
			}
			for _, c := range chosen {
				g.addLink(node, c.node, l)
				g.linkBack(c.node, node, l, degree, between)
			}
			ep = found[0]
		}
		s.release()
		if level > g.top {
			g.entry, g.top = node, level
		}
	}
	return g
}

// selectNeighbours keeps, of candidates sorted best first, those nearer the new node than
// to any already kept (the paper's heuristic), so links spread across directions.
func selectNeighbours(found []cand, m int, between func(a, b uint32) float32) []cand {
	out := make([]cand, 0, m)
	for _, c := range found {
		if len(out) == m {
			break
		}
		keep := true
		for _, o := range out {
			if between(c.node, o.node) > c.sim {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, c)
		}
	}
	return out
}

func (g *graph) addLink(from, to uint32, level int) {
	if level == 0 {
		g.links0[int(from)*g.m0+int(g.deg0[from])] = to
		g.deg0[from]++
		return
	}
	g.upper[from][level-1] = append(g.upper[from][level-1], to)
}

// linkBack links node from to; a full node drops its farthest link for a nearer one.
func (g *graph) linkBack(from, to uint32, level, degree int, between func(a, b uint32) float32) {
	links := g.links(from, level)
	if len(links) < degree {
		g.addLink(from, to, level)
		return
	}
	worst, worstSim := -1, between(from, to)
	for i, l := range links {
		if sim := between(from, l); sim < worstSim {
			worst, worstSim = i, sim
		}
	}
	if worst >= 0 {
		links[worst] = to
	}
}
