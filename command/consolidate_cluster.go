package command

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/loomplane/loom/internal/memrow"
)

// The clustering rule of memory.consolidate (consolidate.go), pure: which active
// memories of a scope are close enough to merge into one summary.

// consolidationCandidate is a memory a run may merge, with its stored vector.
type consolidationCandidate struct {
	row    *memrow.Row
	vector []float32
}

// entityBonus lowers the cosine two memories need when they name an entity in common.
const entityBonus = 0.05

// suppression reports whether a memory states that something is not so or must not be
// done (a suppression, by its type or its tag): such a memory never merges with a
// positive one, which a summary of both would contradict.
func suppression(r *memrow.Row) bool {
	return r.MemoryType == "suppression" || slices.Contains(r.Tags, "suppression")
}

// mayConsolidate reports whether a head may be merged: a fact search serves (so not
// high and not a profile), not redacted, pinned or locked.
func mayConsolidate(r *memrow.Row, now time.Time) bool {
	return r.Served(now) && !r.Redacted && !r.Pinned && !r.Locked
}

// sameCluster reports whether two memories may share a cluster at all: one subject
// (agent and user), one type, one polarity.
func sameCluster(a, b *memrow.Row) bool {
	return a.UserID == b.UserID && a.Agent == b.Agent && a.MemoryType == b.MemoryType && suppression(a) == suppression(b)
}

// clusterCandidates groups candidates greedily: the newest unassigned memory seeds a
// cluster, which takes every unassigned memory that may share it and whose cosine with
// every member is at least minSim (less entityBonus when the two name an entity in
// common), up to maxSize; clusters of one are dropped, and at most maxClusters are
// kept, the largest first. Each cluster lists its members newest first.
func clusterCandidates(cands []consolidationCandidate, minSim float64, maxSize, maxClusters int) [][]consolidationCandidate {
	order := slices.Clone(cands)
	sort.SliceStable(order, func(i, j int) bool {
		if !order[i].row.UpdatedAt.Equal(order[j].row.UpdatedAt) {
			return order[i].row.UpdatedAt.After(order[j].row.UpdatedAt)
		}
		return order[i].row.MemoryID < order[j].row.MemoryID
	})
	used := make([]bool, len(order))
	var out [][]consolidationCandidate
	for i := range order {
		if used[i] || order[i].vector == nil {
			continue
		}
		cluster := []consolidationCandidate{order[i]}
		for j := i + 1; j < len(order) && len(cluster) < maxSize; j++ {
			if used[j] || order[j].vector == nil || !sameCluster(order[i].row, order[j].row) {
				continue
			}
			close := true
			for _, m := range cluster {
				if similarity(m, order[j]) < minSim {
					close = false
					break
				}
			}
			if close {
				cluster = append(cluster, order[j])
				used[j] = true
			}
		}
		if len(cluster) > 1 {
			used[i] = true
			out = append(out, cluster)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	if len(out) > maxClusters {
		out = out[:maxClusters]
	}
	return out
}

// similarity is two memories' cosine, raised by entityBonus when they name an entity
// in common.
func similarity(a, b consolidationCandidate) float64 {
	c := cosine(a.vector, b.vector)
	for _, e := range a.row.Entities {
		if slices.Contains(b.row.Entities, e) {
			return c + entityBonus
		}
	}
	return c
}

func cosine(a, b []float32) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}
