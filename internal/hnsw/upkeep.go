package hnsw

// extendShare: a graph is extended once the rows past it reach 1/extendShare of its
// nodes (at least 1,000), so a search scans at most about that share exactly beside it.
const extendShare = 50

// Upkeep says what an arena of rows vectors (dead of them deleted, graphDead of those
// nodes of g) needs of its graph g (nil: none built yet): build, a graph is due; rebuild,
// over the whole arena (none yet, or a quarter of its nodes died) rather than extended
// by the rows past it; compact, the arena first (a rebuild over an arena a quarter dead).
func Upkeep(g *Graph, rows, dead, graphDead int) (build, rebuild, compact bool) {
	rebuild = g == nil || graphDead >= g.Nodes()/4
	if !rebuild && rows-g.Limit() < max(1000, g.Nodes()/extendShare) {
		return false, false, false
	}
	return true, rebuild, g != nil && rebuild && dead > rows/4
}
