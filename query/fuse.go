package query

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
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
	scores        legScores
	coverage      float64
	fused         float64
	relevance     float64    // the absolute evidence of a match, for the abstain gate
	key           string     // heads.IdentityKey(identity), once computed
	sameKey       *candidate // fuse's next candidate of the same memory key
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

// candidateChunk is how many candidates fuse allocates at a time: one allocation a
// candidate was a sixth of fusing a search's legs, and one slice of a candidate a hit
// allocated half as much again as the candidates took (the legs agree on many rows).
const candidateChunk = 64

// rrfK is reciprocal rank fusion's constant.
const rrfK = 60

// fuse merges the legs' hits into one ranked pool. A chunk hit folds onto its row as
// its vector score when it is the better one.
func fuse(legs map[Leg][]legHit, mode Mode, w Weights) []*candidate {
	// Keyed by the memory key alone, the few candidates of one key (other namespaces,
	// agents, users or sessions) chained from it: a key of the whole identity hashed six
	// strings a hit, and a string key built for each hit was a third of fusing them.
	hits := 0
	for _, l := range legs {
		hits += len(l)
	}
	byKey := make(map[string]*candidate, hits) // no growth while it fills
	// The candidates are allocated candidateChunk at a time rather than one by one; a
	// full chunk is left as it is (the pool points into it) and a new one begun.
	var made []candidate
	get := func(h legHit) *candidate {
		first := byKey[h.id.MemoryKey]
		for c := first; c != nil; c = c.sameKey {
			if c.identity == h.id {
				return c
			}
		}
		if len(made) == cap(made) {
			made = make([]candidate, 0, candidateChunk)
		}
		made = append(made, candidate{identity: h.id, contentSHA256: h.contentSHA256, memoryType: h.memoryType, sameKey: first})
		c := &made[len(made)-1]
		byKey[h.id.MemoryKey] = c
		return c
	}
	for leg, hits := range legs {
		for _, h := range hits {
			c := get(h)
			name := leg
			if leg == LegChunk {
				name = LegVector
			}
			if have := c.scores.get(name); h.score > have || have == 0 {
				c.scores.set(name, math.Max(have, h.score))
			}
			if leg == LegLexical {
				c.coverage = math.Max(c.coverage, h.coverage)
			}
		}
	}
	out := make([]*candidate, 0, len(byKey))
	for _, first := range byKey {
		for c := first; c != nil; c = c.sameKey {
			out = append(out, c)
		}
	}
	for _, c := range out {
		// A key counts toward relevance as the square of the share of its words the
		// query holds: one common word ("office" of office.rotterdam.address) is not
		// evidence of an answer, the whole key is. A row stating a fact about an entity
		// the query names is evidence of a match.
		key := c.scores.get(LegKey)
		c.relevance = max(c.scores.get(LegVector), key*key, c.coverage, c.scores.get(LegGraph))
	}
	switch mode {
	case ModeRRF:
		ranked := make([]*candidate, len(out))
		for _, leg := range []Leg{LegVector, LegLexical, LegKey, LegGraph} {
			copy(ranked, out)
			// A leg's ties go to the row the other legs found more relevant, then by
			// identity: ranks given out in the pool's order let Go's map order cut a tie
			// at the leg's edge, and answers moved from one run to the next.
			slices.SortFunc(ranked, func(a, b *candidate) int {
				if sa, sb := a.scores.get(leg), b.scores.get(leg); sa != sb {
					return cmp.Compare(sb, sa)
				}
				if a.relevance != b.relevance {
					return cmp.Compare(b.relevance, a.relevance)
				}
				if c := strings.Compare(a.identityKey(), b.identityKey()); c != 0 {
					return c
				}
				return strings.Compare(a.identity.Namespace, b.identity.Namespace)
			})
			for rank, c := range ranked {
				if c.scores.get(leg) <= 0 {
					break
				}
				c.fused += 1.0 / float64(rrfK+rank+1)
			}
		}
	default:
		best := 0.0
		for _, c := range out {
			best = math.Max(best, c.scores.get(LegLexical))
		}
		for _, c := range out {
			lex := 0.0
			if best > 0 {
				lex = c.scores.get(LegLexical) / best
			}
			c.fused = w.Vector*math.Max(c.scores.get(LegVector), 0) + w.Lexical*lex + w.Key*c.scores.get(LegKey) + w.Graph*c.scores.get(LegGraph)
		}
	}
	sortFused(out)
	return out
}

// sortFused is sortPool of a pool that holds each identity once: no two candidates
// compare equal once the namespace breaks a tie of identity keys, so an unstable sort
// ranks them as the stable one does, without its merges (a sixth of fusing a pool).
func sortFused(pool []*candidate) {
	slices.SortFunc(pool, func(a, b *candidate) int {
		if a.fused != b.fused {
			if a.fused > b.fused {
				return -1
			}
			return 1
		}
		if c := strings.Compare(a.identityKey(), b.identityKey()); c != 0 {
			return c
		}
		return strings.Compare(a.identity.Namespace, b.identity.Namespace)
	})
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

// scoredLegs are the legs a candidate holds a score of, in the order of their names
// (the order a parked pool writes them in).
var scoredLegs = [...]Leg{LegDate, LegGraph, LegKey, LegLexical, LegVector}

// legScores are a candidate's scores by leg: which legs scored it, and each one's
// score. A map per candidate was half of fusing a search's few hundred hits (its
// allocation and hashing, BenchmarkFuse).
type legScores struct {
	found uint8
	score [len(scoredLegs)]float64
}

// legSlot is l's place in scoredLegs, or -1 for a leg no candidate is scored by.
func legSlot(l Leg) int {
	switch l {
	case LegDate:
		return 0
	case LegGraph:
		return 1
	case LegKey:
		return 2
	case LegLexical:
		return 3
	case LegVector:
		return 4
	}
	return -1
}

// get is l's score, 0 when l did not score the candidate.
func (s *legScores) get(l Leg) float64 {
	if i := legSlot(l); i >= 0 {
		return s.score[i]
	}
	return 0
}

// set records l's score (a leg no candidate is scored by is dropped).
func (s *legScores) set(l Leg, v float64) {
	if i := legSlot(l); i >= 0 {
		s.found |= 1 << i
		s.score[i] = v
	}
}

// each calls fn with every leg that scored the candidate, in scoredLegs' order.
func (s *legScores) each(fn func(Leg, float64)) {
	for i, l := range scoredLegs {
		if s.found&(1<<i) != 0 {
			fn(l, s.score[i])
		}
	}
}

// count is how many legs scored the candidate.
func (s *legScores) count() int { return bits.OnesCount8(s.found) }

// legScoresOf is the scores of m (a pool parked as JSON by an older process).
func legScoresOf(m map[Leg]float64) legScores {
	var s legScores
	for l, v := range m {
		s.set(l, v)
	}
	return s
}

// asMap is the scores as a map of the legs that scored the candidate.
func (s *legScores) asMap() map[Leg]float64 {
	m := make(map[Leg]float64, s.count())
	s.each(func(l Leg, v float64) { m[l] = v })
	return m
}
