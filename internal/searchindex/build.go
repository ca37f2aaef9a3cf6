package searchindex

import (
	"time"

	"github.com/loomplane/loom/internal/hnsw"
)

// graphSource is a snapshot of an arena for a build, and the arena's epoch then: a
// build finished after a compaction (which renumbers the rows) is not installed.
type graphSource struct {
	hnsw.Source
	epoch int
}

// maybeBuild starts a graph build for an arena of s that needs one: a namespace past
// GraphMin value vectors without a graph, or one whose graph has rotted (a quarter of
// its nodes dead), gets one built over its live rows; a graph the rows past it outgrew
// (its tail) is extended by them. The build runs off the lock, over a snapshot;
// searches scan exactly (and the tail beside the old graph) meanwhile. Holding s.mu.
func (x *Index) maybeBuild(s *space) {
	if s.building || x.deferBuilds.Load() {
		return
	}
	for _, a := range s.arenas {
		if a.values < x.cfg.GraphMin {
			continue
		}
		g := a.graph
		build, rebuild, compact := hnsw.Upkeep(g, a.rows(), a.dead, a.graphDead)
		if !build {
			continue
		}
		if compact {
			s.compact(a) // renumbers the rows: the new graph is built over the compacted arena
		}
		src := graphSource{Source: hnsw.Source{Dim: a.dim, Codes: a.codes, Scales: a.scales, Limit: a.rows()}, epoch: a.epoch}
		src.Rows = make([]int32, 0, a.values)
		if !rebuild {
			// Few of its nodes died: the graph is extended by the rows past it, a cost of
			// the tail's size, not rebuilt, a cost of the namespace's.
			src.Base = g
			src.Rows = append(src.Rows, g.Rows()...)
		}
		for slot := range s.docs {
			if c := &s.cards[slot]; c.vecRow >= 0 && int(c.dim) == a.dim && (rebuild || int(c.vecRow) >= g.Limit()) {
				src.Rows = append(src.Rows, c.vecRow)
			}
		}
		s.building = true
		x.builds.Add(1)
		go x.build(s, a, src)
		return
	}
}

func (x *Index) build(s *space, a *arena, src graphSource) {
	defer x.builds.Done()
	select {
	case x.buildSem <- struct{}{}:
	case <-x.closed:
		x.finishBuild(s, a, src, nil)
		return
	}
	stopped := func() bool {
		select {
		case <-x.closed:
			return true
		default:
			return false
		}
	}
	g := hnsw.Build(src.Source, hnsw.Params{M: x.cfg.GraphM, EfConstruction: x.cfg.GraphEfConstruction, Seed: time.Now().UnixNano()}, stopped)
	<-x.buildSem
	x.finishBuild(s, a, src, g)
}

// finishBuild installs a graph unless the arena was compacted (renumbered) or evicted
// since its snapshot, and counts the nodes that died meanwhile.
func (x *Index) finishBuild(s *space, a *arena, src graphSource, g *hnsw.Graph) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.building = false
	if g == nil || !s.held || s.arenas[a.dim] != a || a.epoch != src.epoch {
		return
	}
	dead := 0
	for _, row := range g.Rows() {
		if slot := a.owner[row]; s.cards[slot].vecRow != row {
			dead++
		}
	}
	a.graph, a.graphDead = g, dead
	s.built++
	if src.Base != nil {
		s.extended++
	}
	x.maybeBuild(s)
}
