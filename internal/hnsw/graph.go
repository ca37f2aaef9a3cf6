package hnsw

import (
	"math"
	"math/rand"
	"runtime"
	"slices"
	"sync"
)

// Graph is a hierarchical navigable small world graph (Malkov & Yashunin) over rows of
// int8 codes, as they were when it was built: nodes are numbered 0..n-1 and name their
// rows. Links are flat arrays of node numbers and similarities are int8 dot
// products, so a node costs its links, not a second copy of its vector. It is immutable
// once built; rows written after it (the tail) are scanned exactly beside it until an
// extension (a copy with them inserted) replaces it, and rows that died since are walked
// through but never returned.
type Graph struct {
	m, m0     int
	rows      []int32 // node → row
	limit     int     // rows at the snapshot: rows at or past it are the tail
	links0    []uint32
	deg0      []uint8
	upper     map[uint32][][]uint32 // node → links at levels 1.. (the few nodes above level 0)
	entry     uint32
	top       int
	searchers sync.Pool // *searcher
}

// Source is a snapshot of the rows for a build: rows never change once written, so the
// slices are read without the caller's lock. Row r's codes are Codes[r*Dim:(r+1)*Dim],
// scaled by Scales[r].
type Source struct {
	Dim    int
	Codes  []int8
	Scales []float32
	Rows   []int32 // the rows to take, node by node
	Limit  int     // the rows written at the snapshot: rows at or past it are the caller's tail
	// Base, when set, is the installed graph the build extends: Rows begins with its
	// rows, and only the rest are inserted, into a copy of its links.
	Base *Graph
}

// Nodes is how many nodes the graph holds.
func (g *Graph) Nodes() int { return len(g.rows) }

// Rows is the row each node names, by node; the caller must not change it.
func (g *Graph) Rows() []int32 { return g.rows }

// Limit is the rows written when the graph's snapshot was taken: the rows at or past it
// are not in the graph (its tail), and a search scans them exactly beside it.
func (g *Graph) Limit() int { return g.limit }

// Bytes is what the graph's links hold.
func (g *Graph) Bytes() int64 {
	b := 4*int64(cap(g.rows)) + 4*int64(cap(g.links0)) + int64(cap(g.deg0))
	for _, levels := range g.upper {
		b += 48 // the map entry and its slice header
		for _, l := range levels {
			b += 24 + 4*int64(cap(l))
		}
	}
	return b
}

func (g *Graph) links(node uint32, level int) []uint32 {
	if level == 0 {
		return g.links0[int(node)*g.m0 : int(node)*g.m0+int(g.deg0[node])]
	}
	return g.upper[node][level-1]
}

// Cand is a node and its similarity to what is searched.
type Cand struct {
	Node uint32
	Sim  float32
}

// candHeap is a binary min-heap of candidates by Sim. A walk's heap of candidates to
// expand, nearest first, holds each Sim negated (a max-heap as a min-heap: the same
// comparisons, so the same order), which keeps the comparison free of a branch on
// the heap's kind.
type candHeap struct {
	items []Cand
}

func (h *candHeap) less(i, j int) bool { return h.items[i].Sim < h.items[j].Sim }

func (h *candHeap) push(c Cand) {
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

func (h *candHeap) pop() Cand {
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
func (h *candHeap) peek() Cand { return h.items[0] }

// visitSet marks visited nodes, a bit a node. A walk marks a few thousand nodes
// scattered over the graph: a bit each keeps the set in the cache (12.5 KB at 100,000
// nodes), where an epoch a node (400 KB) was a cache miss of its own for most nodes
// a walk scored; clearing the bits is the price, a few hundred nanoseconds a walk.
type visitSet struct {
	words []uint64
}

func (v *visitSet) reset(n int) {
	words := (n + 63) / 64
	if len(v.words) < words {
		v.words = make([]uint64, words)
		return
	}
	clear(v.words[:words])
}

func (v *visitSet) visit(n uint32) bool {
	w, bit := &v.words[n>>6], uint64(1)<<(n&63)
	if *w&bit != 0 {
		return false
	}
	*w |= bit
	return true
}

// searcher walks a graph: sim scores a node against what is searched. Searchers are
// pooled by their graph, so a walk reuses the last one's visited set, heaps and
// batch instead of growing its own.
type searcher struct {
	g   *Graph
	sim func(node uint32) float32
	// warm, when set, is given the nodes about to be scored, so that it can load what
	// sim will read of all of them at once: the rows of a large graph are in memory,
	// not in the cache, and a node scored after the other is a miss after the other.
	warm   func(nodes []uint32) int8
	warmed int8 // what warm read, kept so that its loads are not dropped
	next   []uint32
	visits visitSet
	cands  candHeap // the nodes to expand, each Sim negated: nearest first
	found  candHeap // the ef best found, farthest first
}

func (g *Graph) searcher(sim func(uint32) float32) *searcher {
	s, _ := g.searchers.Get().(*searcher)
	if s == nil {
		s = &searcher{g: g}
	}
	s.sim = sim
	return s
}

// release returns s to its graph's pool, holding no closure of the walk.
func (s *searcher) release() {
	s.sim, s.warm = nil, nil
	s.g.searchers.Put(s)
}

// greedy descends one level: the neighbour nearest to what is searched, until none is nearer.
func (s *searcher) greedy(ep Cand, level int) Cand {
	for moved := true; moved; {
		moved = false
		for _, n := range s.g.links(ep.Node, level) {
			if sim := s.sim(n); sim > ep.Sim {
				ep, moved = Cand{n, sim}, true
			}
		}
	}
	return ep
}

// layer searches one level from ep and returns the ef best nodes that accept takes
// (all nodes when accept is nil), best first. Nodes accept refuses are walked through.
// maxVisits bounds the walk when accept refuses most nodes.
func (s *searcher) layer(ep Cand, ef, level int, accept func(uint32) bool, maxVisits int) []Cand {
	s.visits.reset(s.g.Nodes())
	s.cands.items, s.found.items = s.cands.items[:0], s.found.items[:0]
	s.visits.visit(ep.Node)
	s.cands.push(Cand{ep.Node, -ep.Sim})
	if accept == nil || accept(ep.Node) {
		s.found.push(ep)
	}
	visits := 1
	for s.cands.len() > 0 {
		c := s.cands.pop()
		c.Sim = -c.Sim
		if s.found.len() >= ef && c.Sim < s.found.peek().Sim {
			break
		}
		if maxVisits > 0 && visits >= maxVisits {
			break
		}
		next := s.next[:0]
		for _, n := range s.g.links(c.Node, level) {
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
			if s.found.len() < ef || sim > s.found.peek().Sim {
				s.cands.push(Cand{n, -sim})
				if accept == nil || accept(n) {
					s.found.push(Cand{n, sim})
					if s.found.len() > ef {
						s.found.pop()
					}
				}
			}
		}
	}
	out := make([]Cand, s.found.len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = s.found.pop()
	}
	return out
}

// RowWarmer is a search's warm for nodes whose rows (node → row, dim codes a row)
// lie in codes, each row's scale in scales: it reads a byte of every cache line of the
// nodes' rows and their scales, loads that do not wait for each other, before the walk
// scores the nodes one after the other. A scale left cold was a miss of its own in
// every score, one after the other (a third of a 100k-node walk's time).
func RowWarmer(codes []int8, scales []float32, dim int, rows []int32) func([]uint32) int8 {
	return func(nodes []uint32) int8 {
		var sum int8
		for _, n := range nodes {
			r := rows[n]
			row := codes[int(r)*dim : int(r+1)*dim]
			for i := 0; i < len(row); i += 64 {
				sum += row[i]
			}
			sum += int8(math.Float32bits(scales[r]))
		}
		return sum
	}
}

// Search returns up to ef nodes nearest what sim scores, that accept takes (every node
// when accept is nil), best first; nodes accept refuses are walked through, and
// maxVisits (when positive) bounds the walk. warm, when set, is given the nodes about to
// be scored (RowWarmer).
func (g *Graph) Search(sim func(uint32) float32, warm func([]uint32) int8, ef int, accept func(uint32) bool, maxVisits int) []Cand {
	if g.Nodes() == 0 {
		return nil
	}
	s := g.searcher(sim)
	s.warm = warm
	defer s.release()
	ep := Cand{g.entry, sim(g.entry)}
	for level := g.top; level > 0; level-- {
		ep = s.greedy(ep, level)
	}
	return s.layer(ep, ef, 0, accept, maxVisits)
}

// Params tune a build: M links a node (2·M at the base level), EfConstruction the
// breadth of the build's walks, Seed the levels' draw.
type Params struct {
	M, EfConstruction int
	Seed              int64
}

// Defaults of a build's and a search's breadths, as memory search measured them.
const (
	DefaultM              = 12
	DefaultEfConstruction = 100
	DefaultEfSearch       = 128
)

// Build builds a graph of src's rows; stop is polled, and a stopped build returns nil.
func Build(src Source, p Params, stop func() bool) *Graph {
	n := len(src.Rows)
	g := &Graph{m: p.M, m0: 2 * p.M, rows: src.Rows, limit: src.Limit, upper: map[uint32][][]uint32{}}
	g.links0 = make([]uint32, n*g.m0)
	g.deg0 = make([]uint8, n)
	if n == 0 {
		return g
	}
	from := 0
	if b := src.Base; b != nil {
		// Searches read the installed graph while this one is built: its links are
		// copied, never changed in place.
		from = b.Nodes()
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
		r := int(src.Rows[node])
		return src.Codes[r*src.Dim : (r+1)*src.Dim]
	}
	scale := func(node uint32) float32 { return src.Scales[src.Rows[node]] }
	between := func(a, b uint32) float32 { return scale(a) * scale(b) * float32(Dot(row(a), row(b))) }
	warm := RowWarmer(src.Codes, src.Scales, src.Dim, src.Rows)
	rng := rand.New(rand.NewSource(p.Seed))
	ml := 1 / math.Log(float64(p.M))
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
		s := g.searcher(func(o uint32) float32 { return qs * scale(o) * float32(Dot(q, row(o))) })
		s.warm = warm
		ep := Cand{g.entry, s.sim(g.entry)}
		for l := g.top; l > level; l-- {
			ep = s.greedy(ep, l)
		}
		for l := min(level, g.top); l >= 0; l-- {
			found := s.layer(ep, p.EfConstruction, l, nil, 0)
			chosen := selectNeighbours(found, p.M, between)
			degree := g.m
			if l == 0 {
				degree = g.m0
			}
			for _, c := range chosen {
				g.addLink(node, c.Node, l)
				g.linkBack(c.Node, node, l, degree, between)
			}
			ep = found[0]
		}
		s.release()
		if level > g.top {
			g.entry, g.top = node, level
		}
		// A build is background work that runs flat out for seconds to minutes: it
		// yields its P after each node, so the writes and searches of its process that
		// are waiting run first rather than up to the scheduler's 10 ms slice later.
		runtime.Gosched()
	}
	return g
}

// selectNeighbours keeps, of candidates sorted best first, those nearer the new node than
// to any already kept (the paper's heuristic), so links spread across directions.
func selectNeighbours(found []Cand, m int, between func(a, b uint32) float32) []Cand {
	out := make([]Cand, 0, m)
	for _, c := range found {
		if len(out) == m {
			break
		}
		keep := true
		for _, o := range out {
			if between(c.Node, o.Node) > c.Sim {
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

func (g *Graph) addLink(from, to uint32, level int) {
	if level == 0 {
		g.links0[int(from)*g.m0+int(g.deg0[from])] = to
		g.deg0[from]++
		return
	}
	g.upper[from][level-1] = append(g.upper[from][level-1], to)
}

// linkBack links node from to; a full node drops its farthest link for a nearer one.
func (g *Graph) linkBack(from, to uint32, level, degree int, between func(a, b uint32) float32) {
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
