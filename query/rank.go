package query

import (
	"context"
	"errors"
	"time"

	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/retrieval"
	"github.com/loomplane/loom/internal/text"
)

// The ranking stage between the legs and validation: the legs a search's settings
// keep, the parts of a multi-part question, and the date anchor. It reads only the
// legs' hit lists (and, for the anchor, the heads), so it is the same on every search
// path.

// LegDate is the date anchor's score: 1 for a row stating a date the query asks about.
const LegDate Leg = "date"

// Anchor settings: how deep into the fused pool the anchor reads the rows, and what a
// date match adds to the fused score (as much as a key match at full weight) and to
// the relevance the verdict reads.
const (
	anchorDepth = 100
	dateWeight  = 0.3
)

// keeps reports whether the settings run a leg (the chunk windows go with vector).
func (r retrievalSettings) keeps(l Leg) bool {
	switch l {
	case LegChunk:
		return r.runs(retrieval.LegVector)
	case LegGraph:
		return r.runs(retrieval.LegGraph)
	}
	return r.runs(string(l))
}

// embedQuery embeds a query text, the embedder's failure mapped for the answer.
func (s *Service) embedQuery(ctx context.Context, q string) ([]float32, error) {
	v, err := s.embedder.query(ctx, q)
	if err != nil {
		if errors.Is(err, embed.ErrEmbedderUnavailable) {
			return nil, httperr.Unavailable(httperr.CodeEmbedderDown, "the embedder is unavailable; retry", err)
		}
		return nil, httperr.Store("embedding the query", err)
	}
	return v, nil
}

// rankPool runs the legs over namespaces for the whole query and, when the settings
// split questions and the plan found several parts, for each part; the parts' pools
// take turns with the whole query's (its best first), so every part gets a slot near
// the top. Each pool is date-anchored first. It answers the merged pool and the whole
// query's own, which holds the background the verdict reads.
func (s *Service) rankPool(ctx context.Context, plan *searchPlan, namespaces []string) (merged, whole []*candidate, err error) {
	if len(namespaces) == 0 {
		return nil, nil, nil
	}
	if whole, err = s.runLegs(ctx, plan, namespaces); err != nil {
		return nil, nil, err
	}
	pools := [][]*candidate{whole}
	if plan.settings.SubQueries && len(plan.query.SubQueries) > 1 {
		for _, sub := range plan.query.SubQueries {
			part := *plan
			req := *plan.req
			req.Query = sub
			part.req = &req
			part.terms = dedupe(append(text.Terms(sub), plan.query.DateTerms...))
			if part.vector, err = s.embedQuery(ctx, sub); err != nil {
				return nil, nil, err
			}
			p, err := s.runLegs(ctx, &part, namespaces)
			if err != nil {
				return nil, nil, err
			}
			pools = append(pools, p)
		}
	}
	for _, p := range pools {
		if len(plan.query.Dates) > 0 && len(p) > 0 {
			if err := s.anchorDates(ctx, plan, p); err != nil {
				return nil, nil, err
			}
		}
	}
	if len(pools) == 1 {
		return whole, whole, nil
	}
	return takeTurns(pools), whole, nil
}

// takeTurns merges ranked pools one row of each in turn, each row once.
func takeTurns(pools [][]*candidate) []*candidate {
	seen := map[string]bool{}
	var out []*candidate
	for rank := 0; ; rank++ {
		more := false
		for _, p := range pools {
			if rank >= len(p) {
				continue
			}
			more = true
			k := p[rank].identity.Namespace + "\x00" + p[rank].identityKey()
			if !seen[k] {
				seen[k] = true
				out = append(out, p[rank])
			}
		}
		if !more {
			return out
		}
	}
}

// anchorDates lifts the rows among the pool's first anchorDepth that state a date the
// query asks about (or whose validity starts in it), then re-sorts that part of the
// pool by the lifted scores.
func (s *Service) anchorDates(ctx context.Context, plan *searchPlan, pool []*candidate) error {
	head := pool[:min(len(pool), anchorDepth)]
	rows, err := s.headsOf(ctx, plan.f.org, head)
	if err != nil {
		return httperr.Store("reading the rows the date anchor compares", err)
	}
	for _, c := range head {
		h := rows[c.identity.Namespace][c.identityKey()]
		if h == nil || h.ContentSHA256 != c.contentSHA256 {
			continue
		}
		if statesDate(h, plan.query.Dates) {
			// A row stating an asked date is evidence for the verdict as for the rank.
			c.scores[LegDate] = 1
			c.fused += dateWeight
			c.relevance = min(1, c.relevance+dateWeight)
		}
	}
	sortPool(head)
	return nil
}

// statesDate reports whether a row's text states a day within one of the spans, or its
// validity starts within one.
func statesDate(h *memrow.Row, spans []dateRange) bool {
	days := mentionedDates(memrow.ValueText(h.Value))
	if h.ValidAt != nil {
		days = append(days, *h.ValidAt)
	}
	for _, d := range days {
		for _, span := range spans {
			if span.overlaps(d, d.Add(24*time.Hour)) {
				return true
			}
		}
	}
	return false
}
