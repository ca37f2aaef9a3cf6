package query

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
)

// headsOf reads the Postgres heads of candidates, by namespace and then
// heads.IdentityKey, in one round trip (two when a head's user is named by its column
// alone: heads.Unnamed).
func (s *Service) headsOf(ctx context.Context, org string, cands []*candidate) (map[string]map[string]*memrow.Row, error) {
	b := &pgx.Batch{}
	var unnamed heads.Unnamed
	out := s.queueHeads(b, &unnamed, org, cands)
	if b.Len() == 0 {
		return out, nil
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	if err := unnamed.Name(ctx, s.pool); err != nil {
		return nil, err
	}
	return out, nil
}

// queueHeads queues the reads of candidates' heads on b, one statement per namespace,
// each row opened in Go (heads.QueueManyOpened: the value as its canonical JSON); the
// answer holds them, by namespace and then heads.IdentityKey, once b is sent and
// unnamed has named its rows.
func (s *Service) queueHeads(b *pgx.Batch, unnamed *heads.Unnamed, org string, cands []*candidate) map[string]map[string]*memrow.Row {
	byNS := map[string][]memrow.Identity{}
	for _, c := range cands {
		id := c.identity
		id.Org = org
		byNS[id.Namespace] = append(byNS[id.Namespace], id)
	}
	out := make(map[string]map[string]*memrow.Row, len(byNS))
	for ns, ids := range byNS {
		out[ns] = make(map[string]*memrow.Row, len(ids))
		heads.QueueManyOpened(b, s.kek, unnamed, out[ns], org, ns, ids)
	}
	return out
}

// validate serves the pool from offset on: a candidate is served only while its key's
// Postgres head is live, searchable, of the candidate's type and content, and matches
// the filters and the token's read scope; the value served is the head's. The first
// window is topK candidates; what it drops is refilled once from the ranked remainder,
// and every drop counts in stale_dropped. Priors then reorder the page's near-ties.
// It returns the page, the pool index the next page starts at, and the drops. Each
// window's heads are read in one round trip, with whatever also(b, next) queues on the
// same batch (the parking of the pool from the window's end on).
func (s *Service) validate(ctx context.Context, plan *searchPlan, pool []*candidate, offset, topK int,
	also func(b *pgx.Batch, next int) error) ([]hitView, int, int, error) {
	now := s.now()
	hits := []hitView{} // an empty page answers "hits": [], never null
	stale := 0
	next := offset
	for round := 0; round < 2 && len(hits) < topK && next < len(pool); round++ {
		window := pool[next:min(next+topK-len(hits), len(pool))]
		next += len(window)
		b := &pgx.Batch{}
		var unnamed heads.Unnamed
		current := s.queueHeads(b, &unnamed, plan.f.org, window)
		if also != nil {
			if err := also(b, next); err != nil {
				return nil, 0, 0, err
			}
		}
		if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
			return nil, 0, 0, err
		}
		if err := unnamed.Name(ctx, s.pool); err != nil {
			return nil, 0, 0, err
		}
		for _, c := range window {
			h := current[c.identity.Namespace][c.identityKey()]
			if h == nil || h.ContentSHA256 != c.contentSHA256 || h.MemoryType != c.memoryType || !plan.serves(h, now) {
				stale++
				plan.trace.drop(c, dropReason(h, c))
				continue
			}
			p := prior(priorInput{confidence: h.Confidence, reinforcement: h.ReinforcementCount, tagHits: overlap(plan.req.Tags, h.Tags),
				updatedAt: h.UpdatedAt, recency: plan.recency(), now: now, trust: trustOf(h)}, s.cfg.PriorCap)
			score := c.fused * (1 + p)
			hits = append(hits, hitView{memoryView: viewOf(h), Score: round6(score), Scores: map[string]float64{
				"vector": round6(c.scores.get(LegVector)), "lexical": round6(c.scores.get(LegLexical)), "lexical_coverage": round6(c.coverage),
				"key": round6(c.scores.get(LegKey)), "prior": round6(p), "fused": round6(c.fused), "relevance": round6(c.relevance),
			}})
			if t := trustOf(h); t != 0 {
				hits[len(hits)-1].Scores["trust"] = round6(t)
			}
			if plan.settings.keeps(LegGraph) {
				hits[len(hits)-1].Scores[string(LegGraph)] = round6(c.scores.get(LegGraph))
			}
			if len(plan.query.Dates) > 0 {
				hits[len(hits)-1].Scores[string(LegDate)] = c.scores.get(LegDate)
			}
		}
	}
	// Priors reorder near-ties within the page.
	for i := 1; i < len(hits); i++ {
		for j := i; j > 0 && hits[j].Score > hits[j-1].Score; j-- {
			hits[j], hits[j-1] = hits[j-1], hits[j]
		}
	}
	if hits == nil {
		hits = []hitView{}
	}
	return hits, next, stale, nil
}

// dropReason says why validation dropped a candidate, for the trace.
func dropReason(h *memrow.Row, c *candidate) string {
	switch {
	case h == nil:
		return "gone"
	case h.ContentSHA256 != c.contentSHA256:
		return "content_changed"
	case h.MemoryType != c.memoryType:
		return "type_changed"
	}
	return "filtered"
}

// serves applies the search's filters and read scope to a head, the authority.
func (p *searchPlan) serves(h *memrow.Row, now time.Time) bool {
	// as_of asks what was valid then: validity is judged at as_of, deletion and expiry now.
	live := h.Live(now)
	if p.f.asOf != nil {
		live = !h.Tombstone && (h.ExpiresAt == nil || now.Before(*h.ExpiresAt))
	}
	if !live || !h.Embedded() || !slices.Contains(p.f.statuses, h.Status) {
		return false
	}
	f := p.f
	if (f.agent != "" && h.Agent != f.agent) || !f.identityMatches(h.UserID, h.SessionID) {
		return false
	}
	if (f.memoryType != "" && h.MemoryType != f.memoryType) || f.hides(h.MemoryType) {
		return false
	}
	if !f.provenance.matches(h) {
		return false
	}
	if len(f.tags) > 0 {
		n := overlap(f.tags, h.Tags)
		if (f.tagsAny && n == 0) || (!f.tagsAny && n < len(f.tags)) {
			return false
		}
	}
	if f.asOf != nil {
		if (h.ValidAt != nil && h.ValidAt.After(*f.asOf)) || (h.ValidTo != nil && !h.ValidTo.After(*f.asOf)) {
			return false
		}
	}
	return true
}

func overlap(a, b []string) int {
	n := 0
	for _, x := range a {
		if contains(b, x) {
			n++
		}
	}
	return n
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func round6(f float64) float64 { return float64(int64(f*1e6+0.5)) / 1e6 }
