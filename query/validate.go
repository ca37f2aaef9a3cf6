package query

import (
	"context"

	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
)

// validate serves a hit only while its key's Postgres head is live, of the hit's type,
// active and holds the content its search document was built from; the value served is
// the head's. The first topK candidates are checked, the dropped ones are refilled once
// from the ranked remainder, and every drop counts in stale_dropped.
func (s *Service) validate(ctx context.Context, f filter, cands []candidate, topK int) ([]hitView, int, error) {
	hits := []hitView{}
	stale := 0
	now := s.now()
	first := cands[:min(topK, len(cands))]
	rest := cands[len(first):]
	for round := 0; round < 2 && len(first) > 0; round++ {
		ids := make([]memrow.Identity, len(first))
		for i, c := range first {
			ids[i] = c.identity
		}
		current, err := heads.Many(ctx, s.pool, f.org, f.namespace, ids)
		if err != nil {
			return nil, 0, err
		}
		for _, c := range first {
			h, ok := current[heads.IdentityKey(c.identity)]
			if !ok || !h.Served(now) || h.MemoryType != c.memoryType || h.ContentSHA256 != c.contentSHA256 {
				stale++
				continue
			}
			hits = append(hits, hitView{memoryView: viewOf(h), Score: c.score, Scores: map[string]float64{"vector": c.score}})
		}
		need := topK - len(hits)
		if need <= 0 {
			break
		}
		first, rest = rest[:min(need, len(rest))], rest[min(need, len(rest)):]
	}
	return hits, stale, nil
}
