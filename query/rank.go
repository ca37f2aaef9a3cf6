package query

import (
	"context"
	"errors"
	"slices"
	"strings"
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
			p, err := s.runPart(ctx, plan, namespaces, sub)
			if err != nil {
				return nil, nil, err
			}
			pools = append(pools, p)
		}
	}
	var expanded, seeds []*candidate
	if plan.settings.SetExpansion {
		if expanded, seeds, err = s.expandSet(ctx, plan, namespaces, whole); err != nil {
			return nil, nil, err
		}
	}
	for _, p := range append(pools, expanded) {
		if len(plan.query.Dates) > 0 && len(p) > 0 {
			if err := s.anchorDates(ctx, plan, p); err != nil {
				return nil, nil, err
			}
		}
	}
	merged = whole
	if len(pools) > 1 {
		merged = takeTurns(pools)
	}
	if len(expanded) > 0 {
		merged = mergeExpansion(merged, expanded, seeds)
	}
	if plan.settings.AnchorPool {
		if merged, err = s.addAnchorPool(ctx, plan, namespaces, merged); err != nil {
			return nil, nil, err
		}
	}
	return merged, whole, nil
}

// mergeExpansion adds the expansion's rows to the pool: the best row it found beyond
// its seeds scores expansionShare of the pool's best, the rest in proportion, and a row
// both found keeps the better score. Validation orders a page by score, so the share,
// not a slot, is what places the expansion's rows.
func mergeExpansion(pool, expanded, seeds []*candidate) []*candidate {
	key := func(c *candidate) string { return c.identity.Namespace + "\x00" + c.identityKey() }
	isSeed := map[string]bool{}
	for _, c := range seeds {
		isSeed[key(c)] = true
	}
	top := 0.0
	for _, c := range expanded {
		if !isSeed[key(c)] {
			top = max(top, c.fused)
		}
	}
	if top <= 0 || len(pool) == 0 {
		return pool
	}
	scale := expansionShare * pool[0].fused / top
	byKey := make(map[string]*candidate, len(pool))
	for _, c := range pool {
		byKey[key(c)] = c
	}
	out := pool
	for _, c := range expanded {
		scored := c.fused * scale
		if have, ok := byKey[key(c)]; ok {
			have.fused = max(have.fused, scored)
			continue
		}
		c.fused = scored
		out = append(out, c)
	}
	sortPool(out)
	return out
}

// runPart runs the legs for one part of the question (a sub-query, an expansion) as
// the whole query's plan would, with its own text, terms and vector.
func (s *Service) runPart(ctx context.Context, plan *searchPlan, namespaces []string, q string) ([]*candidate, error) {
	part := *plan
	req := *plan.req
	req.Query = q
	part.req = &req
	part.terms = dedupe(append(text.Terms(q), plan.query.DateTerms...))
	var err error
	if part.vector, err = s.embedQuery(ctx, q); err != nil {
		return nil, err
	}
	return s.runLegs(ctx, &part, namespaces)
}

// Set expansion (memory-architecture memory.search step 5's additive pool): a
// question about a named entity's relation ("Where does Kwame's cousin work now?")
// is answered by a row naming a third party ("Ingrid … starts at the opera house")
// that shares no word with it but the bridge a better row holds ("My cousin Ingrid is
// staying with us"). The rows the question found best are read for the names they
// hold that the question does not, and the names are searched with the question's
// attribute words.
const (
	expansionSeeds  = 2   // the best rows read for names
	expansionNear   = 0.9 // a seed past the first must score at least this share of the first's
	expansionNames  = 2   // names searched at most
	expansionShare  = 0.9 // the expansion's best new row scores this share of the pool's best
	expansionDepth  = 20  // the expansion's rows read for the names
	expansionMinLen = 3   // a name's letters at least
)

// expandSet answers the expansion's pool and the rows it started from, or nil when the
// question names no entity, asks nothing of it, or its best rows name no one else.
func (s *Service) expandSet(ctx context.Context, plan *searchPlan, namespaces []string, whole []*candidate) (pool, seeds []*candidate, err error) {
	if len(plan.query.Entities) == 0 || len(plan.query.AttributeTerms) == 0 || len(whole) == 0 || whole[0].fused <= 0 {
		return nil, nil, nil
	}
	seeds = []*candidate{whole[0]}
	for _, c := range whole[1:min(expansionSeeds, len(whole))] {
		if c.fused >= expansionNear*whole[0].fused {
			seeds = append(seeds, c)
		}
	}
	rows, err := s.headsOf(ctx, plan.f.org, seeds)
	if err != nil {
		return nil, nil, httperr.Store("reading the rows set expansion starts from", err)
	}
	asked := map[string]bool{}
	for _, w := range text.Words(strings.ToLower(plan.req.Query)) {
		asked[w] = true
	}
	// A best row that holds every word the question asks of its entity answers it:
	// there is no second hop to take.
	if h := rows[whole[0].identity.Namespace][whole[0].identityKey()]; h != nil && holdsAll(text.Terms(memrow.ValueText(h.Value)), plan.query.AttributeTerms) {
		return nil, nil, nil
	}
	var names []string
	for _, c := range seeds {
		h := rows[c.identity.Namespace][c.identityKey()]
		if h == nil || h.ContentSHA256 != c.contentSHA256 {
			continue
		}
		for _, id := range identifiers(memrow.ValueText(h.Value), nil) {
			if id.Kind != identName || len([]rune(id.Text)) < expansionMinLen || slices.Contains(names, id.Text) {
				continue
			}
			known := false
			for _, w := range text.Words(strings.ToLower(id.Text)) {
				known = known || asked[w]
			}
			if !known && len(names) < expansionNames {
				names = append(names, id.Text)
			}
		}
	}
	if len(names) == 0 {
		return nil, nil, nil
	}
	q := strings.Join(names, " ") + " " + strings.Join(wordsOf(plan.req.Query, plan.query.AttributeTerms), " ")
	plan.query.Expansion = q
	found, err := s.runPart(ctx, plan, namespaces, q)
	if err != nil || len(found) == 0 {
		return nil, nil, err
	}
	// Only a row holding a name is reached through it; the attribute words alone find
	// the chatter the question already ranked.
	found = found[:min(len(found), expansionDepth)]
	rows, err = s.headsOf(ctx, plan.f.org, found)
	if err != nil {
		return nil, nil, httperr.Store("reading the rows set expansion found", err)
	}
	for _, c := range found {
		h := rows[c.identity.Namespace][c.identityKey()]
		if h == nil || h.ContentSHA256 != c.contentSHA256 {
			continue
		}
		words := groundWords(memrow.ValueText(h.Value))
		for _, n := range names {
			if holdsAll(words, groundWords(n)) {
				pool = append(pool, c)
				break
			}
		}
	}
	return pool, seeds, nil
}

// holdsAll reports whether words hold every word of want.
func holdsAll(words, want []string) bool {
	for _, w := range want {
		if !slices.Contains(words, w) {
			return false
		}
	}
	return len(want) > 0
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
			c.scores.set(LegDate, 1)
			c.fused += dateWeight
			c.relevance = min(1, c.relevance+dateWeight)
		}
	}
	sortPool(head)
	return nil
}

// statesDate reports whether a row's text states a day within one of the spans, or its
// validity starts within one, or the text states a relative time ("yesterday", "last
// weekend") that, read against the row's valid_at (when it was said), falls in one.
func statesDate(h *memrow.Row, spans []dateRange) bool {
	text := memrow.ValueText(h.Value)
	days := mentionedDates(text)
	if h.ValidAt != nil {
		days = append(days, *h.ValidAt)
		for _, d := range statedSpans(text, *h.ValidAt) {
			for _, span := range spans {
				if span.overlaps(d.From, d.To) {
					return true
				}
			}
		}
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
