package query

import (
	"context"
	"time"

	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/searchindex"
)

// indexLegs reads a namespace's legs from the process's search index: one in-memory
// pass over the namespace for all four. A namespace the index no longer holds answers
// searchindex.ErrNotHeld.
type indexLegs struct {
	index *searchindex.Index
	k1, b float64 // BM25
	now   func() time.Time
}

func (x indexLegs) store() string { return sourceIndex }

func (x indexLegs) legs(_ context.Context, q legQuery) (map[Leg][]legHit, error) {
	legs, _, err := x.index.Search(searchindex.Space{Org: q.f.org, Namespace: q.ns}, x.query(q))
	if err != nil {
		return nil, err
	}
	return map[Leg][]legHit{
		LegVector: legHitsOf(q.ns, legs.Vector), LegChunk: legHitsOf(q.ns, legs.Chunk),
		LegLexical: legHitsOf(q.ns, legs.Lexical), LegKey: legHitsOf(q.ns, legs.Key),
	}, nil
}

// query is q as the index takes it: the same filter the ClickHouse legs' predicates
// apply, the query's vector, text and terms, each leg's pool and BM25's settings.
func (x indexLegs) query(q legQuery) searchindex.Query {
	f := q.f
	statuses := make([]string, len(f.statuses))
	for i, st := range f.statuses {
		statuses[i] = string(st)
	}
	filter := searchindex.Filter{Agent: f.agent, UserID: f.userID, SessionID: f.sessionID, MemoryType: f.memoryType,
		Tags: f.tags, TagsAny: f.tagsAny, Statuses: statuses, Now: x.now()}
	if f.shared {
		filter.OrUserID = memrow.SharedUser
	}
	if f.asOf != nil {
		filter.ValidAt = *f.asOf
	}
	return searchindex.Query{Filter: filter, Vector: q.vector, Text: q.text, Terms: q.terms, Limit: q.limit, K1: x.k1, B: x.b}
}

func legHitsOf(ns string, hits []searchindex.Hit) []legHit {
	if len(hits) == 0 {
		return nil
	}
	out := make([]legHit, len(hits))
	for i, h := range hits {
		out[i] = legHit{id: memrow.Identity{Namespace: ns, Agent: h.Agent, UserID: h.UserID, SessionID: h.SessionID, MemoryKey: h.MemoryKey},
			contentSHA256: h.ContentSHA256, memoryType: h.MemoryType, score: h.Score, coverage: h.Coverage}
	}
	return out
}
