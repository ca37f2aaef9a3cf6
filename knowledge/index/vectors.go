package index

import (
	"time"

	"github.com/loomplane/loom/internal/hnsw"
)

// Config tunes the index. Zero fields take the defaults, which are memory search's
// (internal/searchindex) but for EfSearch.
type Config struct {
	// GraphMin is how many chunk vectors of one size a namespace holds before its vector
	// leg walks an approximate (HNSW) graph; below it every search scans exactly. The
	// process gives it LOOM_INDEX_GRAPH_MIN, memory search's threshold.
	GraphMin int
	// ExactMax: a filter that leaves at most this many chunks is scanned exactly, graph
	// or not.
	ExactMax int
	// EfSearch is the breadth of a search's walk; it walks at least as wide as the pool
	// it keeps. Default defaultEfSearch.
	EfSearch int
}

// Memory search's defaults (searchindex.Config).
const (
	defaultGraphMin = 20000
	defaultExactMax = 10000
	// graphFilterRatio: the graph serves a filter that leaves at least 1/graphFilterRatio
	// of its nodes; a more selective one is scanned exactly.
	graphFilterRatio = 10
	// defaultEfSearch is four times memory search's 128: chunks are long texts, whose
	// hash-embedded vectors have less neighbourhood structure than a memory's sentence.
	// BenchmarkRecallOnRealText (30,000 chunks of the Go distribution's source, tuning
	// half) measured recall@10 of the vector leg against the exact scan at 0.855 with
	// 128, 0.890 with 256 and 0.955 with 512, at 26.2, 22.2 and 21.6 ms of CPU a
	// search (the lexical leg is most of it; the exact scan took 54.4 ms). Once the
	// lexical leg summed per slot (search.go), a run at load 40-100 measured, ef 128
	// against 512: recall@10 0.860/0.955 at 4.9/7.6 ms of CPU (Go source, tuning),
	// 0.849/0.971 at 10.6/4.9 ms (held out), 0.823/0.992 and 0.812/0.945 over the
	// transcripts; the CPU figures are noise at that load, the recall is not: 512 kept.
	defaultEfSearch = 512
)

func (c Config) withDefaults() Config {
	if c.GraphMin <= 0 {
		c.GraphMin = defaultGraphMin
	}
	if c.ExactMax <= 0 {
		c.ExactMax = defaultExactMax
	}
	if c.EfSearch <= 0 {
		c.EfSearch = defaultEfSearch
	}
	return c
}

// arena holds a namespace's chunk vectors of one size as int8 codes (hnsw's), append
// only, for the graph: a chunk keeps its float32 vector too, which the exact scan reads
// and every score a search answers is taken from. Rows never change once written, so a
// build reads a snapshot of the arena off the index's lock.
type arena struct {
	dim    int
	codes  []int8
	scales []float32
	owner  []*Chunk // per row: its chunk, nil once the chunk is dropped
	dead   int
	// graphDead counts the graph's nodes whose chunk was dropped since it was built.
	graphDead int
	epoch     int // bumped by every compaction: rows are renumbered
	graph     *hnsw.Graph
	building  bool
}

func (a *arena) rows() int             { return len(a.scales) }
func (a *arena) live() int             { return a.rows() - a.dead }
func (a *arena) row(r int32) []int8    { return a.codes[int(r)*a.dim : int(r+1)*a.dim] }
func (a *arena) needsCompaction() bool { return a.dead > 1024 && a.dead > a.live() }

func (s *space) arena(dim int) *arena {
	a := s.arenas[dim]
	if a == nil {
		a = &arena{dim: dim}
		s.arenas[dim] = a
	}
	return a
}

// addVector gives c a row of its vector's arena.
func (s *space) addVector(c *Chunk) {
	c.row = -1
	if len(c.vec) == 0 {
		return
	}
	a := s.arena(len(c.vec))
	n := len(a.codes)
	a.codes = append(a.codes, make([]int8, a.dim)...)
	c.row = int32(a.rows())
	a.scales = append(a.scales, hnsw.Quantise(c.vec, a.codes[n:]))
	a.owner = append(a.owner, c)
}

// dropVector retires c's row.
func (s *space) dropVector(c *Chunk) {
	if c.row < 0 {
		return
	}
	a := s.arenas[len(c.vec)]
	a.owner[c.row] = nil
	a.dead++
	if a.graph != nil && int(c.row) < a.graph.Limit() {
		a.graphDead++
	}
	c.row = -1
}

// compact copies the live rows into fresh arrays and renumbers them; the graph goes
// with the old numbering. A build under way keeps its snapshot of the old arrays and is
// not installed.
func (a *arena) compact() {
	codes := make([]int8, 0, a.live()*a.dim)
	scales := make([]float32, 0, a.live())
	owner := make([]*Chunk, 0, a.live())
	for r, c := range a.owner {
		if c == nil {
			continue
		}
		c.row = int32(len(scales))
		codes = append(codes, a.row(int32(r))...)
		scales = append(scales, a.scales[r])
		owner = append(owner, c)
	}
	a.codes, a.scales, a.owner, a.dead = codes, scales, owner, 0
	a.epoch++
	a.graph, a.graphDead = nil, 0
}

// maybeBuild starts a graph build for each arena of s that needs one, as memory search
// does: past GraphMin live vectors without a graph, or with a graph a quarter of whose
// nodes died, one over its live rows; a graph the rows past it outgrew is extended by
// them. The build runs off the lock over a snapshot; searches scan exactly (and the
// tail beside the old graph) meanwhile. Holding x.mu.
func (x *Index) maybeBuild(key [2]string, s *space) {
	for _, a := range s.arenas {
		if a.needsCompaction() {
			a.compact()
		}
		if a.building || a.live() < x.cfg.GraphMin {
			continue
		}
		g := a.graph
		build, rebuild, compact := hnsw.Upkeep(g, a.rows(), a.dead, a.graphDead)
		if !build {
			continue
		}
		if compact {
			a.compact()
		}
		src := hnsw.Source{Dim: a.dim, Codes: a.codes, Scales: a.scales, Limit: a.rows(), Rows: make([]int32, 0, a.live())}
		from := 0
		if !rebuild {
			src.Base, from = g, g.Limit()
			src.Rows = append(src.Rows, g.Rows()...)
		}
		for r := from; r < a.rows(); r++ {
			if a.owner[r] != nil {
				src.Rows = append(src.Rows, int32(r))
			}
		}
		a.building = true
		x.builds.Add(1)
		go x.build(key, s, a, src, a.epoch)
	}
}

func (x *Index) build(key [2]string, s *space, a *arena, src hnsw.Source, epoch int) {
	defer x.builds.Done()
	var g *hnsw.Graph
	select {
	case x.buildSem <- struct{}{}: // one build at a time: they are CPU-bound
		stopped := func() bool {
			select {
			case <-x.closed:
				return true
			default:
				return false
			}
		}
		g = hnsw.Build(src, hnsw.Params{M: hnsw.DefaultM, EfConstruction: hnsw.DefaultEfConstruction, Seed: time.Now().UnixNano()}, stopped)
		<-x.buildSem
	case <-x.closed:
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	a.building = false
	if g == nil || x.spaces[key] != s || s.arenas[a.dim] != a || a.epoch != epoch {
		return
	}
	dead := 0
	for _, r := range g.Rows() {
		if a.owner[r] == nil {
			dead++
		}
	}
	a.graph, a.graphDead = g, dead
	x.maybeBuild(key, s)
}

// Close stops the graph builds under way and waits for them.
func (x *Index) Close() {
	x.close.Do(func() { close(x.closed) })
	x.builds.Wait()
}

// Settle waits for the graph builds under way and those they start; for tests and
// benchmarks.
func (x *Index) Settle() {
	for {
		x.builds.Wait()
		x.mu.RLock()
		busy := false
		for _, s := range x.spaces {
			for _, a := range s.arenas {
				busy = busy || a.building
			}
		}
		x.mu.RUnlock()
		if !busy {
			return
		}
	}
}

// graphLeg is the vector leg over a's graph: the walk's best nodes that f takes, and
// the rows written since the graph (its tail) scanned exactly, pooled by their int8
// similarity and scored again against the float32 vectors, each chunk with a positive
// cosine appended to into. pool is how many the leg needs; eligible how many chunks f
// leaves, which widens the walk by the share f refuses.
func (sc *scorer) graphLeg(a *arena, f Filter, pool, eligible, efSearch int, into []scored) []scored {
	g := a.graph
	codes := make([]int8, a.dim)
	qs := hnsw.Quantise(sc.vec, codes)
	coded := func(r int32) float32 { return qs * a.scales[r] * float32(hnsw.Dot(codes, a.row(r))) }
	all := f.all()
	takes := func(r int32) bool {
		c := a.owner[r]
		return c != nil && !c.src.deleted && (all || f.match(c))
	}
	k := pool + pool/4 + 16 // the rescore may reorder the edge of the int8 ranking
	ef := max(efSearch, k)
	if share := float64(eligible) / float64(max(a.live(), 1)); share < 1 {
		ef = min(int(float64(ef)/share), 8*max(efSearch, k))
	}
	rows := g.Rows()
	top := hnsw.NewTopK(k)
	found := g.Search(func(n uint32) float32 { return coded(rows[n]) }, hnsw.RowWarmer(a.codes, a.scales, a.dim, rows), ef,
		func(n uint32) bool { return takes(rows[n]) }, 40*ef)
	for _, c := range found {
		top.Offer(uint32(rows[c.Node]), c.Sim)
	}
	for r := int32(g.Limit()); r < int32(a.rows()); r++ {
		if takes(r) {
			top.Offer(uint32(r), coded(r))
		}
	}
	for _, r := range top.IDs() {
		c := a.owner[r]
		if v, ok := sc.vector(c); ok && v > 0 {
			into = append(into, scored{c, v})
		}
	}
	return into
}

// eligible is how many chunks of s f leaves (a source's chunks share what f reads).
func eligible(s *space, f Filter) int {
	n := 0
	for _, src := range s.sources {
		if !src.deleted && len(src.chunks) > 0 && f.match(src.chunks[0]) {
			n += len(src.chunks)
		}
	}
	return n
}

// Graphed is how many live chunk vectors a namespace holds and how many of them its
// graphs hold (the rest, written since a build, are scanned exactly beside them); for
// benchmarks, which measure a built graph rather than the scan a search falls back to
// while one builds.
func (x *Index) Graphed(org, ns string) (vectors, nodes int) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	s := x.spaces[[2]string{org, ns}]
	if s == nil {
		return 0, 0
	}
	for _, a := range s.arenas {
		vectors += a.live()
		if a.graph != nil {
			nodes += a.graph.Nodes() - a.graphDead
		}
	}
	return vectors, nodes
}
