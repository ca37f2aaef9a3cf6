package query

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/searchindex"
)

// Where a namespace's vector, chunk, lexical and key legs read: the process's search
// index when it holds the namespace (one in-memory pass over the namespace for all four
// legs), else ClickHouse (one statement per leg, legs.go). The graph leg always reads
// ClickHouse. Both give the same legHits, so fusion, priors, validation against the
// heads and paging do not know which one answered.

// Sources a namespace's legs read, as loom_search_namespace_reads_total labels them.
const (
	sourceIndex      = "index"
	sourceClickHouse = "clickhouse"
)

// legJob runs one or more legs of one namespace.
type legJob struct {
	name string
	run  func() (map[Leg][]legHit, error)
}

// oneLeg is a job that runs a single leg.
func oneLeg(leg Leg, run func() ([]legHit, error)) legJob {
	return legJob{name: string(leg), run: func() (map[Leg][]legHit, error) {
		hits, err := run()
		return map[Leg][]legHit{leg: hits}, err
	}}
}

// indexedNamespaces are the namespaces of a search the process's index holds.
func (s *Service) indexedNamespaces(org string, namespaces []string) map[string]bool {
	out := map[string]bool{}
	if s.index == nil {
		return out
	}
	for _, ns := range namespaces {
		if s.index.Held(searchindex.Space{Org: org, Namespace: ns}) {
			out[ns] = true
		}
	}
	return out
}

// waitForLegs is a search's barrier: the namespaces the index holds wait for the
// index, the others for the projection's watermark; a search with the graph leg waits
// for the watermark of every namespace too, since that leg reads ClickHouse.
func (s *Service) waitForLegs(ctx context.Context, org string, plan *searchPlan) (Passed, error) {
	start := plan.capture.start
	plan.indexed = s.indexedNamespaces(org, plan.namespaces)
	passed, err := s.barrier.WaitCaptured(ctx, org, plan.capture, s.index, func(ns string) bool { return plan.indexed[ns] })
	if err != nil {
		return passed, err
	}
	plan.generations = passed.Generations
	if plan.settings.keeps(LegGraph) && len(plan.indexed) > 0 {
		gens := map[string]int64{}
		for ns := range plan.indexed {
			gens[ns] = passed.Generations[ns]
		}
		if err := s.barrier.WaitProjected(ctx, org, gens, start.Add(s.barrier.Budget())); err != nil {
			return passed, err
		}
		passed.WaitedMS = time.Since(start).Milliseconds()
	}
	return passed, nil
}

// legJobs are the jobs that run a namespace's vector, chunk, lexical and key legs.
func (s *Service) legJobs(ctx context.Context, plan *searchPlan, ns string) []legJob {
	if plan.indexed[ns] {
		return []legJob{{name: sourceIndex, run: func() (map[Leg][]legHit, error) { return s.indexLegs(ctx, plan, ns) }}}
	}
	s.legReads.With(sourceClickHouse).Inc()
	return s.clickhouseLegJobs(ctx, plan, ns)
}

func (s *Service) clickhouseLegJobs(ctx context.Context, plan *searchPlan, ns string) []legJob {
	return []legJob{
		oneLeg(LegVector, func() ([]legHit, error) { return s.vectorLeg(ctx, plan.f, ns, plan.vector, plan.pool) }),
		oneLeg(LegChunk, func() ([]legHit, error) { return s.chunkLeg(ctx, plan.f, ns, plan.vector, plan.pool) }),
		oneLeg(LegLexical, func() ([]legHit, error) { return s.lexicalLeg(ctx, plan.f, ns, plan.terms, plan.pool) }),
		oneLeg(LegKey, func() ([]legHit, error) { return s.keyLeg(ctx, plan.f, ns, plan.req.Query, plan.terms, plan.pool) }),
	}
}

// indexLegs runs the four legs over the index's copy of the namespace. A namespace the
// index dropped since the barrier (past its memory budget) is read from ClickHouse once
// the projection reaches the generation the search captured.
func (s *Service) indexLegs(ctx context.Context, plan *searchPlan, ns string) (map[Leg][]legHit, error) {
	sp := searchindex.Space{Org: plan.f.org, Namespace: ns}
	legs, _, err := s.index.Search(sp, plan.indexQuery(s.cfg.BM25K1, s.cfg.BM25B, s.now()))
	if errors.Is(err, searchindex.ErrNotHeld) {
		gens := map[string]int64{ns: plan.generations[ns]}
		if err := s.barrier.WaitProjected(ctx, plan.f.org, gens, time.Now().Add(s.barrier.Budget())); err != nil {
			return nil, err
		}
		s.legReads.With(sourceClickHouse).Inc()
		return runLegJobs(s.clickhouseLegJobs(ctx, plan, ns))
	}
	if err != nil {
		return nil, err
	}
	s.legReads.With(sourceIndex).Inc()
	return map[Leg][]legHit{
		LegVector: legHitsOf(ns, legs.Vector), LegChunk: legHitsOf(ns, legs.Chunk),
		LegLexical: legHitsOf(ns, legs.Lexical), LegKey: legHitsOf(ns, legs.Key),
	}, nil
}

// indexQuery is the plan as the index takes it: the same filter the ClickHouse legs'
// predicates apply, the query's vector, text and terms, each leg's pool and BM25's
// settings.
func (p *searchPlan) indexQuery(k1, b float64, now time.Time) searchindex.Query {
	f := p.f
	statuses := make([]string, len(f.statuses))
	for i, st := range f.statuses {
		statuses[i] = string(st)
	}
	filter := searchindex.Filter{Agent: f.agent, UserID: f.userID, SessionID: f.sessionID, MemoryType: f.memoryType,
		Tags: f.tags, TagsAny: f.tagsAny, Statuses: statuses, Now: now}
	if f.asOf != nil {
		filter.ValidAt = *f.asOf
	}
	return searchindex.Query{Filter: filter, Vector: p.vector, Text: p.req.Query, Terms: p.terms, Limit: p.pool, K1: k1, B: b}
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

// runLegJobs runs the jobs concurrently and gathers their hits by leg. A barrier's
// answer or an envelope passes as it is; any other failure is ClickHouse's.
func runLegJobs(jobs []legJob) (map[Leg][]legHit, error) {
	legs := map[Leg][]legHit{}
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hits, err := j.run()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("%s leg: %w", j.name, err)
				}
				return
			}
			for leg, h := range hits {
				legs[leg] = append(legs[leg], h...)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		var he *httperr.Error
		var behind *BehindError
		if errors.As(firstErr, &he) || errors.As(firstErr, &behind) {
			return nil, firstErr
		}
		return nil, chUnavailable("running the search legs", firstErr)
	}
	return legs, nil
}
