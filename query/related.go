package query

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/retrieval"
)

const (
	relatedLimitDefault = 10
	relatedLimitMax     = 50
	// relatedEntitiesMax bounds the entities whose other facts the graph neighbours are.
	relatedEntitiesMax = 8
)

// Why a memory is another's neighbour.
const (
	relatedGraph   = "graph"   // they name an entity in common
	relatedVector  = "vector"  // their values are near in the embedding space
	relatedSession = "session" // they were written in the same session
)

// relatedMemory is a neighbour, with every way it is one.
type relatedMemory struct {
	memoryView
	Cite   string   `json:"cite"`
	Via    []string `json:"via"`
	Shared []string `json:"shared_entities,omitempty"`
	Score  float64  `json:"score,omitempty"` // the vector leg's relevance
}

type relatedAnswer struct {
	Memory    memoryView      `json:"memory"`
	Neighbors []relatedMemory `json:"neighbors"`
}

// related is memory.related: a memory's neighbours within the token's read scope and
// the memory's user: the live facts naming its entities, the search's vector leg run
// on its value (every hit checked against its head behind the barrier), and the other
// facts of its session. Each kind is at most limit; graph first, then vector, then
// session.
func (s *Service) related(ctx context.Context, p auth.Principal, id memrow.Identity, limitText string) (*relatedAnswer, error) {
	limit := relatedLimitDefault
	if limitText != "" {
		n, err := strconv.Atoi(limitText)
		if err != nil || n < 1 || n > relatedLimitMax {
			return nil, httperr.Validation("limit", fmt.Sprintf("limit must be an integer from 1 to %d", relatedLimitMax))
		}
		limit = n
	}
	head, err := heads.Read(ctx, s.pool, id)
	if err != nil {
		return nil, httperr.Store("reading the head", err)
	}
	now := s.now()
	if head == nil || !head.Live(now) || !inReadScope(p, head) {
		return nil, httperr.NotFound("memory not found")
	}
	ans := &relatedAnswer{Memory: viewOf(head), Neighbors: []relatedMemory{}}
	at := map[string]int{heads.IdentityKey(head.Identity): -1}
	kinds := map[string]int{}
	add := func(r *memrow.Row, via string) *relatedMemory {
		k := heads.IdentityKey(r.Identity)
		i, seen := at[k]
		if i < 0 || (!seen && kinds[via] >= limit) {
			return nil
		}
		if !seen {
			at[k] = len(ans.Neighbors)
			ans.Neighbors = append(ans.Neighbors, relatedMemory{memoryView: viewOf(r), Cite: memoryCite(r.MemoryID, r.Version)})
			i = at[k]
		}
		n := &ans.Neighbors[i]
		if !slices.Contains(n.Via, via) {
			n.Via = append(n.Via, via)
			kinds[via]++
		}
		return n
	}
	scope := heads.Scope{Org: id.Org, Namespace: id.Namespace, UserID: head.UserID}
	for _, e := range head.Entities[:min(len(head.Entities), relatedEntitiesMax)] {
		found, err := heads.Naming(ctx, s.pool, scope, e, limit+1)
		if err != nil {
			return nil, httperr.Store("reading the entity's heads", err)
		}
		for _, r := range found {
			if r.Live(now) {
				if n := add(r, relatedGraph); n != nil && !slices.Contains(n.Shared, e) {
					n.Shared = append(n.Shared, e)
				}
			}
		}
	}
	if text := []rune(valueText(head.Value)); len(text) > 0 && head.Embedded() {
		zero := 0.0
		hits, err := s.search(ctx, p, id.Namespace, &searchRequest{Query: string(text[:min(len(text), maxQueryChars)]), TopK: limit + 1,
			UserID: head.UserID, Legs: []string{retrieval.LegVector}, MinScore: &zero, MinDistinctness: &zero})
		if err != nil {
			return nil, err
		}
		for _, h := range hits.Hits {
			r := memrow.Row{Identity: memrow.Identity{Org: id.Org, Namespace: h.Namespace, Agent: h.Agent, UserID: h.UserID, SessionID: h.SessionID, MemoryKey: h.MemoryKey}}
			if h.Namespace != id.Namespace {
				continue
			}
			if n := addView(add, &r, h.memoryView, relatedVector); n != nil {
				n.Score = h.Scores["relevance"]
			}
		}
	}
	if head.SessionID != memrow.DefaultIdentity {
		found, err := heads.Naming(ctx, s.pool, heads.Scope{Org: id.Org, Namespace: id.Namespace, Agent: head.Agent, UserID: head.UserID, SessionID: head.SessionID}, "", limit+1)
		if err != nil {
			return nil, httperr.Store("reading the session's heads", err)
		}
		for _, r := range found {
			if r.Live(now) {
				add(r, relatedSession)
			}
		}
	}
	return ans, nil
}

// addView adds a search hit as a neighbour, its view as the search served it.
func addView(add func(*memrow.Row, string) *relatedMemory, r *memrow.Row, v memoryView, via string) *relatedMemory {
	n := add(r, via)
	if n != nil && len(n.Via) == 1 {
		n.memoryView, n.Cite = v, memoryCite(v.MemoryID, v.Version)
	}
	return n
}
