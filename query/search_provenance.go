package query

import (
	"context"
	"fmt"
	"slices"

	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// memory.search's filters on what a row names and where it came from (entities,
// source_class, verified), and the provenance tail of its ranking. The search
// documents the legs read carry none of these columns, so the filters are applied to
// the fused pool against the rows' Postgres heads (the authority), before the page is
// cut: a filter narrows what the query found, each leg's pool deep.

// sourceClasses are the source classes a row may hold (command/set.go).
var sourceClasses = []string{"direct", "derived", "external", "imported"}

// provenanceFilter is a search's filter on entities, source class and verification.
type provenanceFilter struct {
	entities      []string // canonical names (memrow.EntityName), every one named
	sourceClasses []string
	verified      *bool
}

func (p provenanceFilter) active() bool {
	return len(p.entities) > 0 || len(p.sourceClasses) > 0 || p.verified != nil
}

// matches reports whether a head passes the filter.
func (p provenanceFilter) matches(h *memrow.Row) bool {
	for _, e := range p.entities {
		named := false
		for _, have := range h.Entities {
			named = named || memrow.EntityName(have) == e
		}
		if !named {
			return false
		}
	}
	if len(p.sourceClasses) > 0 && !slices.Contains(p.sourceClasses, h.SourceClass) {
		return false
	}
	if p.verified != nil && (h.VerifiedBy != "") != *p.verified {
		return false
	}
	return true
}

func provenanceOf(req *searchRequest) provenanceFilter {
	p := provenanceFilter{sourceClasses: req.SourceClass, verified: req.Verified}
	for _, e := range req.Entities {
		p.entities = append(p.entities, memrow.EntityName(e))
	}
	return p
}

// checkProvenanceFilter refuses an empty entity name, too many entities, or a source
// class no row holds.
func checkProvenanceFilter(req *searchRequest) error {
	if len(req.Entities) > memrow.MaxEntities {
		return httperr.Validation("entities", fmt.Sprintf("entities holds %d names; at most %d", len(req.Entities), memrow.MaxEntities))
	}
	for _, e := range req.Entities {
		if memrow.EntityName(e) == "" {
			return httperr.Validation("entities", "an entity name must not be empty")
		}
	}
	for _, c := range req.SourceClass {
		if !slices.Contains(sourceClasses, c) {
			return httperr.Validation("source_class", "source_class may hold direct, derived, external or imported")
		}
	}
	return nil
}

// narrowPool drops the pool's rows the provenance filter refuses, reading their heads
// a window at a time; a row whose head is gone stays for validation to count.
func (s *Service) narrowPool(ctx context.Context, plan *searchPlan, pool []*candidate) ([]*candidate, error) {
	if !plan.f.provenance.active() || len(pool) == 0 {
		return pool, nil
	}
	const window = 500
	out := pool[:0:0]
	for start := 0; start < len(pool); start += window {
		part := pool[start:min(start+window, len(pool))]
		rows, err := s.headsOf(ctx, plan.f.org, part)
		if err != nil {
			return nil, httperr.Store("reading the heads the search's filters judge", err)
		}
		for _, c := range part {
			if h := rows[c.identity.Namespace][c.identityKey()]; h == nil || plan.f.provenance.matches(h) {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// Provenance trust (memory-architecture memory.search step 6's correctness tail): a
// verified row is trusted more, a row the server did not take from its writer first
// hand (derived, external, imported) less, and a conflicted row is demoted. It adds to
// the capped prior group, so it reorders near-ties and never lifts a weak match over
// a strong one.
const (
	trustVerified   = 0.3
	trustDerived    = -0.1
	trustExternal   = -0.2
	trustImported   = -0.1
	demoteConflicts = -0.3
)

// trustOf is a head's provenance term of the prior.
func trustOf(h *memrow.Row) float64 {
	t := 0.0
	if h.VerifiedBy != "" {
		t += trustVerified
	}
	switch h.SourceClass {
	case "derived":
		t += trustDerived
	case "external":
		t += trustExternal
	case "imported":
		t += trustImported
	}
	if h.Status == memrow.StatusConflicted {
		t += demoteConflicts
	}
	return t
}
