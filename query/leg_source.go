package query

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/searchindex"
)

// A search reads each namespace's vector, chunk, lexical and key legs from one store,
// chosen once at the barrier: the process's search index when it holds the namespace
// (leg_source_index.go), else ClickHouse (leg_source_clickhouse.go). Both answer the
// same legHits, so fusion, priors, validation against the heads and paging do not know
// which one answered, and leg_source_parity_test.go holds them to the same hits on the
// same data. The graph leg reads the entity tables, which only ClickHouse keeps
// (graph_leg.go).

// legSource is where a namespace's search-document legs read.
type legSource interface {
	// store names the store, as loom_search_namespace_reads_total labels it.
	store() string
	// legs runs the vector, chunk, lexical and key legs of q over its namespace.
	legs(ctx context.Context, q legQuery) (map[Leg][]legHit, error)
}

// Stores a namespace's legs read, as loom_search_namespace_reads_total labels them.
const (
	sourceIndex      = "index"
	sourceClickHouse = "clickhouse"
)

// legQuery is one namespace's part of a search: what each of its legs is asked.
type legQuery struct {
	ns     string
	f      filter
	vector []float32 // the query's embedding; the vector and chunk legs rank by it
	text   string    // the query as written: the key leg matches a key verbatim
	terms  []string  // the query's index terms: the lexical and key legs match them
	limit  int       // hits per leg
}

// legQuery is the plan's question to namespace ns.
func (p *searchPlan) legQuery(ns string) legQuery {
	return legQuery{ns: ns, f: p.f, vector: p.vector, text: p.req.Query, terms: p.terms, limit: p.pool}
}

// legSources chooses each namespace's source: the index for those it holds, ClickHouse
// for the others (every namespace, in a process without an index).
func (s *Service) legSources(org string, namespaces []string) map[string]legSource {
	out := make(map[string]legSource, len(namespaces))
	for _, ns := range namespaces {
		out[ns] = s.clickhouseLegs
		if s.index != nil && s.index.Held(searchindex.Space{Org: org, Namespace: ns}) {
			out[ns] = s.indexLegs
		}
	}
	return out
}

// waitForLegs is a search's barrier, where each namespace's source is chosen: the
// namespaces the index holds wait for the index, the others for the projection's
// watermark; a search with the graph leg waits for the watermark of every namespace
// too, since that leg reads ClickHouse.
func (s *Service) waitForLegs(ctx context.Context, org string, plan *searchPlan) (Passed, error) {
	start := plan.capture.start
	plan.sources = s.legSources(org, plan.namespaces)
	indexed := func(ns string) bool { return plan.sources[ns].store() == sourceIndex }
	passed, err := s.barrier.WaitCaptured(ctx, org, plan.capture, s.index, indexed)
	if err != nil {
		return passed, err
	}
	plan.generations = passed.Generations
	if !plan.settings.keeps(LegGraph) {
		return passed, nil
	}
	gens := map[string]int64{}
	for _, ns := range plan.namespaces {
		if indexed(ns) {
			gens[ns] = passed.Generations[ns]
		}
	}
	if len(gens) == 0 {
		return passed, nil
	}
	if err := s.barrier.WaitProjected(ctx, org, gens, start.Add(s.barrier.Budget())); err != nil {
		return passed, err
	}
	passed.WaitedMS = time.Since(start).Milliseconds()
	return passed, nil
}

// readLegs runs the legs of every namespace concurrently, each namespace's on its
// source and, when the settings keep it, its graph leg, and gathers the hits by leg. A
// barrier's answer or an envelope passes as it is; any other failure is ClickHouse's.
func (s *Service) readLegs(ctx context.Context, plan *searchPlan, namespaces []string) (map[Leg][]legHit, error) {
	var g errgroup.Group
	var gathered legSet
	for _, ns := range namespaces {
		g.Go(func() error {
			legs, err := s.namespaceLegs(ctx, plan, ns)
			gathered.add(legs)
			return err
		})
		if plan.settings.keeps(LegGraph) {
			g.Go(func() error {
				hits, err := s.graphLeg(ctx, plan.f, ns, plan.graphNames(), plan.pool)
				if err != nil {
					return fmt.Errorf("%s leg: %w", LegGraph, err)
				}
				gathered.add(map[Leg][]legHit{LegGraph: hits})
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		var he *httperr.Error
		var behind *BehindError
		if errors.As(err, &he) || errors.As(err, &behind) {
			return nil, err
		}
		return nil, chUnavailable("running the search legs", err)
	}
	return gathered.legs, nil
}

// namespaceLegs runs a namespace's legs on the source chosen at the barrier. A
// namespace the index dropped since (past its memory budget) is read from ClickHouse
// once the projection reaches the generation the search captured.
func (s *Service) namespaceLegs(ctx context.Context, plan *searchPlan, ns string) (map[Leg][]legHit, error) {
	q := plan.legQuery(ns)
	src := plan.sources[ns]
	legs, err := src.legs(ctx, q)
	if errors.Is(err, searchindex.ErrNotHeld) {
		gens := map[string]int64{ns: plan.generations[ns]}
		if err := s.barrier.WaitProjected(ctx, plan.f.org, gens, time.Now().Add(s.barrier.Budget())); err != nil {
			return nil, err
		}
		src = s.clickhouseLegs
		legs, err = src.legs(ctx, q)
	}
	s.legReads.With(src.store()).Inc()
	return legs, err
}

// legSet gathers the hits of legs run concurrently.
type legSet struct {
	mu   sync.Mutex
	legs map[Leg][]legHit
}

// add gathers legs, whose slices it takes: a source's hits are its caller's. A leg's
// first hits are kept as they are, not copied (a search of one namespace copied ~800
// hits of 144 bytes each, 115 KB, for nothing); clipped, so that another namespace's
// hits appended to them land in a new array.
func (l *legSet) add(legs map[Leg][]legHit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.legs == nil {
		l.legs = map[Leg][]legHit{}
	}
	for leg, hits := range legs {
		if have := l.legs[leg]; have != nil {
			l.legs[leg] = append(have, hits...)
		} else {
			l.legs[leg] = slices.Clip(hits)
		}
	}
}
