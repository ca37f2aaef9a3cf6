package command

import (
	"fmt"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
)

// A verdict read in the search index (or ClickHouse) can be wrong by the time the write
// commits: a peer committed meanwhile is not among the rows it read. Admission closes
// that window with generations. Before its peer read a write captures the namespace's
// position in the process's index, or, when ClickHouse serves the read, the projection
// watermark (every revision at or below it is in what the read sees). At its commit, under
// the generation lock, the revisions committed after the capture (the gap) are
// examined: what cannot be a peer is ruled out on what the commit holds; anything
// else sends the write back to its verdict with those rows measured and added.

// vectorCacheSize bounds the value vectors kept of this process's writes.
const vectorCacheSize = 20000

func newVectorCache() *lru.Cache[string, []float32] {
	c, _ := lru.New[string, []float32](vectorCacheSize)
	return c
}

// vectorKey names a row's value vector by the model that embedded it and the value's
// hash: a vector is a function of the two, so one remembered when its write was
// embedded is right for any revision holding that content, whether or not that write
// committed. Kept by seq, it was only remembered after its commit answered, and the
// commit queued behind it on the namespace's lock found the gap row unmeasured and
// went back to its verdict: 40% of the commits of eight writers on one namespace.
func vectorKey(model string, dim int, sha string) string {
	return fmt.Sprintf("%s/%d/%s", model, dim, sha)
}

// rowVectorKey names a stored row's value vector.
func rowVectorKey(r *memrow.Row) string {
	return vectorKey(r.EmbeddingModel, r.EmbeddingDim, r.ContentSHA256)
}

// vectorMargin is how far below the threshold a locally measured row must be to be
// ruled out: a peer read would measure the same row differently by as much. ClickHouse
// stores the same float32 vector (rounding only); the index stores int8 codes, whose
// cosines are within 0.004 of the float32 one (internal/searchindex), so a row the gap
// check rules out is one no peer read could have put over the threshold.
const vectorMargin = 0.005

// reach is the lowest cosine at which a peer can change a write's verdict: the conflict
// threshold, or the resolver's floor when it is on and lower (a peer at the floor marks
// the write for judgement, so the verdict must see it too).
func reach(threshold, judgementFloor float64) float64 {
	if judgementFloor > 0 && judgementFloor < threshold {
		return judgementFloor
	}
	return threshold
}

// errGap sends a write back to its verdict: revisions in the gap may be peers.
type errGap struct {
	rows []*memrow.Row
	upTo int64 // the last seq the gap covered
}

func (e *errGap) Error() string {
	return fmt.Sprintf("%d revisions committed since the capture may be peers", len(e.rows))
}

// gapCheck returns the check a round's commit runs on its gap. A gap row is ruled out
// when it is the write's own key (rechecked under its head lock), cannot be a peer
// (type, liveness, status, scope), or was measured here and is clearly out of reach.
// A new revision of a peer the verdict judged is never ruled out: the verdict read it.
func (s *Service) gapCheck(q peerQuery, sha string, judged []peer, threshold float64) func([]gapRevision) error {
	threshold = reach(threshold, s.judgementFloor())
	return func(gap []gapRevision) error {
		latest := map[string]gapRevision{}
		var order []string
		for _, g := range gap {
			k := heads.IdentityKey(g.row.Identity)
			if _, seen := latest[k]; !seen {
				order = append(order, k)
			}
			latest[k] = g
		}
		judgedKeys := map[string]bool{}
		for _, p := range judged {
			judgedKeys[heads.IdentityKey(p.row.Identity)] = true
		}
		now := s.now()
		e := &errGap{upTo: gap[len(gap)-1].seq}
		for _, k := range order {
			g := latest[k]
			switch {
			case g.row.MemoryKey == q.id.MemoryKey:
				continue // the write's own key is rechecked under its head lock; another session's is markSameKey's (admit.go)
			case judgedKeys[k]:
			case !isPeer(g.row, q, now):
				continue
			case g.row.ContentSHA256 == sha:
			default:
				if v, ok := s.vectors.Get(rowVectorKey(g.row)); ok && embed.Dot(v, q.vector) < threshold-vectorMargin {
					continue
				}
			}
			e.rows = append(e.rows, g.row)
		}
		if len(e.rows) == 0 {
			return nil
		}
		return e
	}
}

// mergePeers overlays newer rows of the same keys on a peer list, nearest first;
// a row that is no longer a peer (cosine -1) removes its key.
func mergePeers(base, newer []peer) []peer {
	idx := map[string]int{}
	out := append([]peer(nil), base...)
	for i, p := range out {
		idx[heads.IdentityKey(p.row.Identity)] = i
	}
	for _, p := range newer {
		k := heads.IdentityKey(p.row.Identity)
		if i, ok := idx[k]; ok {
			out[i] = p
		} else {
			idx[k] = len(out)
			out = append(out, p)
		}
	}
	kept := out[:0]
	for _, p := range out {
		if p.cosine >= 0 {
			kept = append(kept, p)
		}
	}
	sortPeers(kept)
	return kept
}

func sortPeers(ps []peer) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j].cosine > ps[j-1].cosine; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}
