package index

import (
	"math"
	"sort"

	"github.com/loomplane/loom/internal/text"
)

// referenceSearch is Search as it was before its legs were bounded (issue 31's 100k
// run): it scores every chunk, allocates a candidate for each and sorts them all. Kept
// to check that Search answers the same. One change: a leg's ties were ranked in the
// sources map's iteration order (random from call to call); here they are ranked by
// chunkBefore, as Search ranks them.
func (x *Index) referenceSearch(org, ns, query string, vec []float32, f Filter, depth int) []Candidate {
	x.mu.RLock()
	defer x.mu.RUnlock()
	s := x.spaces[[2]string{org, ns}]
	if s == nil || s.chunks == 0 {
		return nil
	}
	terms := text.Terms(query)
	avg := float64(s.totalLen) / float64(max(s.chunks, 1))
	var all []*Candidate
	for _, src := range s.sources {
		if src.deleted {
			continue
		}
		for _, c := range src.chunks {
			if !f.match(c) {
				continue
			}
			cand := &Candidate{Chunk: c}
			for _, t := range terms {
				tf := float64(c.tfs[t])
				if tf == 0 {
					continue
				}
				df := float64(s.df[t])
				idf := math.Log(1 + (float64(s.chunks)-df+0.5)/(df+0.5))
				const k1, b = 1.2, 0.75
				cand.Lexical += idf * tf * (k1 + 1) / (tf + k1*(1-b+b*float64(c.length)/max(avg, 1)))
			}
			if len(vec) > 0 && len(vec) == len(c.vec) {
				var dot float32
				for i := range vec {
					dot += vec[i] * c.vec[i]
				}
				cand.Vector = float64(dot)
			}
			all = append(all, cand)
		}
	}
	referenceFuse(all, func(c *Candidate) float64 { return c.Lexical })
	if len(vec) > 0 {
		referenceFuse(all, func(c *Candidate) float64 { return c.Vector })
	}
	var out []Candidate
	for _, c := range all {
		if c.Score > 0 {
			out = append(out, *c)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		if out[i].SourceURI != out[j].SourceURI {
			return out[i].SourceURI < out[j].SourceURI
		}
		return out[i].Ordinal < out[j].Ordinal
	})
	if len(out) > depth {
		out = out[:depth]
	}
	return out
}

// fuse adds each candidate's reciprocal rank under score to its fused score;
// a candidate scoring 0 or less has no rank in that leg.
func referenceFuse(all []*Candidate, score func(*Candidate) float64) {
	ranked := make([]*Candidate, 0, len(all))
	for _, c := range all {
		if score(c) > 0 {
			ranked = append(ranked, c)
		}
	}
	sort.SliceStable(ranked, func(i, j int) bool {
		if si, sj := score(ranked[i]), score(ranked[j]); si != sj {
			return si > sj
		}
		return chunkBefore(ranked[i].Chunk, ranked[j].Chunk)
	})
	for r, c := range ranked {
		c.Score += 1 / float64(rrfK+r+1)
	}
}
