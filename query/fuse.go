package query

import (
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
)

// Leg is one ranking of a search's candidates; fuse merges them.
type Leg string

// Legs of a search (and LegGraph, graph_leg.go).
const (
	LegVector  Leg = "vector"
	LegChunk   Leg = "chunk" // a long value's windows: folds onto its row as LegVector
	LegLexical Leg = "lexical"
	LegKey     Leg = "key"
)

// Mode is how fuse merges the legs (the request's mode).
type Mode string

// Fusion modes.
const (
	ModeWeighted Mode = "weighted"
	ModeRRF      Mode = "rrf"
)

// legHit is one candidate of one leg.
type legHit struct {
	id            memrow.Identity
	contentSHA256 string
	memoryType    string
	score         float64 // the leg's own score: a cosine, a BM25 score, a key match
	coverage      float64 // lexical: the share of the query's idf the row's terms hold
}

// candidate is a row some leg found, with every leg's score for it.
type candidate struct {
	identity      memrow.Identity
	contentSHA256 string
	memoryType    string
	scores        map[Leg]float64
	coverage      float64
	fused         float64
	relevance     float64 // the absolute evidence of a match, for the abstain gate
	key           string  // heads.IdentityKey(identity), once computed
}

// identityKey is heads.IdentityKey of the candidate's identity, computed once: a pool's
// sort compares it for every tie.
func (c *candidate) identityKey() string {
	if c.key == "" {
		c.key = heads.IdentityKey(c.identity)
	}
	return c.key
}

// Weights weigh the legs in weighted mode; lexical is normalised by the pool's best.
// The graph leg runs only when a search asks for it, and adds to the others.
type Weights struct{ Vector, Lexical, Key, Graph float64 }

// rrfK is reciprocal rank fusion's constant.
const rrfK = 60

// fuse merges the legs' hits into one ranked pool. A chunk hit folds onto its row as
// its vector score when it is the better one.
func fuse(legs map[Leg][]legHit, mode Mode, w Weights) []*candidate {
	// Keyed by the identity itself: a string key built for each of a search's hits was
	// a third of fusing them.
	hits := 0
	for _, l := range legs {
		hits += len(l)
	}
	byID := make(map[memrow.Identity]*candidate, hits) // no growth while it fills
	get := func(h legHit) *candidate {
		c, ok := byID[h.id]
		if !ok {
			c = &candidate{identity: h.id, contentSHA256: h.contentSHA256, memoryType: h.memoryType, scores: map[Leg]float64{}}
			byID[h.id] = c
		}
		return c
	}
	for leg, hits := range legs {
		for _, h := range hits {
			c := get(h)
			name := leg
			if leg == LegChunk {
				name = LegVector
			}
			if h.score > c.scores[name] || c.scores[name] == 0 {
				c.scores[name] = math.Max(c.scores[name], h.score)
			}
			if leg == LegLexical {
				c.coverage = math.Max(c.coverage, h.coverage)
			}
		}
	}
	out := make([]*candidate, 0, len(byID))
	for _, c := range byID {
		// A key counts toward relevance as the square of the share of its words the
		// query holds: one common word ("office" of office.rotterdam.address) is not
		// evidence of an answer, the whole key is. A row stating a fact about an entity
		// the query names is evidence of a match.
		key := c.scores[LegKey]
		c.relevance = max(c.scores[LegVector], key*key, c.coverage, c.scores[LegGraph])
		out = append(out, c)
	}
	switch mode {
	case ModeRRF:
		for _, leg := range []Leg{LegVector, LegLexical, LegKey, LegGraph} {
			ranked := append([]*candidate(nil), out...)
			sort.SliceStable(ranked, func(i, j int) bool { return ranked[i].scores[leg] > ranked[j].scores[leg] })
			for rank, c := range ranked {
				if c.scores[leg] > 0 {
					c.fused += 1.0 / float64(rrfK+rank+1)
				}
			}
		}
	default:
		best := 0.0
		for _, c := range out {
			best = math.Max(best, c.scores[LegLexical])
		}
		for _, c := range out {
			lex := 0.0
			if best > 0 {
				lex = c.scores[LegLexical] / best
			}
			c.fused = w.Vector*math.Max(c.scores[LegVector], 0) + w.Lexical*lex + w.Key*c.scores[LegKey] + w.Graph*c.scores[LegGraph]
		}
	}
	sortPool(out)
	return out
}

// sortPool ranks a pool by fused score, ties by identity key, stably.
func sortPool(pool []*candidate) {
	slices.SortStableFunc(pool, func(a, b *candidate) int {
		if a.fused != b.fused {
			if a.fused > b.fused {
				return -1
			}
			return 1
		}
		return strings.Compare(a.identityKey(), b.identityKey())
	})
}

// priorInput is what a row's priors are computed from.
type priorInput struct {
	confidence    float64
	reinforcement int
	tagHits       int
	updatedAt     time.Time
	recency       bool
	now           time.Time
	trust         float64 // trustOf the head: verification, source class, conflict
}

// prior is the capped prior group: confidence, reinforcement, the query's tags, the
// provenance tail (trust) and, when asked, recency. It multiplies the fused score by at most 1+cap, so a prior
// reorders near-ties and never lifts a weak match over a strong one.
func prior(in priorInput, limit float64) float64 {
	p := 0.4*(in.confidence-0.5) + 0.2*math.Log1p(float64(in.reinforcement)) + 0.3*float64(in.tagHits) + in.trust
	if in.recency {
		age := in.now.Sub(in.updatedAt).Hours() / 24
		p += 0.5 * math.Exp(-age/30)
	}
	// squash into [-limit, limit]
	return limit * math.Tanh(p)
}
