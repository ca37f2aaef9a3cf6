package query

import (
	"context"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/evidence"
	"github.com/loomplane/loom/internal/extractqueue"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/retrieval"
	"github.com/loomplane/loom/internal/text"
)

// maxQueryChars bounds a search query's text.
const maxQueryChars = 4000

// searchRequest is the body of POST /v1/namespaces/{ns}/memories:search.
type searchRequest struct {
	Query             string          `json:"query"`
	TopK              int             `json:"top_k"`
	Namespaces        []string        `json:"namespaces"` // more namespaces beside the path's
	Agent             string          `json:"agent"`
	UserID            string          `json:"user_id"`
	SessionID         string          `json:"session_id"`
	MemoryType        string          `json:"memory_type"`
	Tags              []string        `json:"tags"`
	TagsMode          string          `json:"tags_mode"` // all (default) or any
	Status            []memrow.Status `json:"status"`
	IncludeSuperseded bool            `json:"include_superseded"`
	AsOf              *time.Time      `json:"as_of"`
	// ReferenceTime is when the question is asked (the conversation's or session's
	// date): relative dates in the query ("yesterday", "last week", "in March") are
	// read against its calendar day, in its own offset, instead of the server's clock.
	ReferenceTime *time.Time `json:"reference_time"`
	Mode          Mode       `json:"mode"` // weighted (default) or rrf
	Recency       bool       `json:"recency"`
	PageToken     string     `json:"page_token"`
	// Paging parks the rest of the ranked pool for a next page (next_page_token), as
	// the seed's paging=true does; without it the page is the whole answer. Parking is
	// the largest write a search makes (its pool, sealed: 1.7-2.1 ms of Postgres time
	// and 0.34 ms of this process's CPU a search at 100k memories), so a caller that
	// reads one page does not pay it. A next page keeps paging.
	Paging bool `json:"paging"`
	// Graph adds the graph leg: the rows naming the query's entities and their
	// neighbours one edge away.
	Graph bool `json:"graph"`

	// Entities keeps the rows naming every one of these entities (memory.set's
	// entities, compared as canonical names); SourceClass the rows of one of these
	// source classes; Verified the rows memory.verify marked (true) or not (false).
	Entities    []string `json:"entities"`
	SourceClass []string `json:"source_class"`
	Verified    *bool    `json:"verified"`

	// Retrieval settings over the namespace's retrieval_defaults (recipes.go).
	Recipe          string             `json:"recipe"`
	Legs            []string           `json:"legs"`
	Weights         *retrieval.Weights `json:"weights"`
	Pool            int                `json:"pool"`
	MinScore        *float64           `json:"min_score"`
	MinDistinctness *float64           `json:"min_distinctness"`
	Grounding       string             `json:"grounding"`
	Rerank          *bool              `json:"rerank"`
	SubQueries      *bool              `json:"sub_queries"`
	SetExpansion    *bool              `json:"set_expansion"`
	AnchorPool      *bool              `json:"anchor_pool"`
	// Trace keeps the search's full trace for memory.search_trace (trace.go).
	Trace bool `json:"trace"`
	// Evidence runs the evidence legs (search_evidence.go) when the scope keeps turns;
	// off unless the namespace's retrieval_defaults turn them on (they cost a search
	// several round trips and the scan of its scope's recent chunks).
	Evidence *bool `json:"evidence,omitempty"`
	// EvidenceLegs names the evidence legs that run (turns, digests, entities); unset,
	// the namespace's, else all.
	EvidenceLegs []string `json:"evidence_legs,omitempty"`
	// The page assembler's caps (search_caps.go): the page's tokens, counted with
	// tokenizer (or model's), and how many hits one memory key and one session hold.
	MaxTokens  *int64 `json:"max_tokens,omitempty"`
	PerKey     *int   `json:"per_key,omitempty"`
	PerSession *int   `json:"per_session,omitempty"`
	Tokenizer  string `json:"tokenizer,omitempty"`
	Model      string `json:"model,omitempty"`

	// fromRoute: the search route asked (the evidence legs may run); a search another
	// read runs (context.pack, memory.related, memory.ask) reads no evidence.
	fromRoute bool
}

// hitView is one search hit with the scores that ranked it.
type hitView struct {
	memoryView
	Score  float64            `json:"score"`
	Scores map[string]float64 `json:"scores"`
}

// Verdict is what a search answers of its hits: an honest abstain tells "nothing
// relevant" from "nothing stored".
type Verdict string

// Verdicts a search answers with.
const (
	VerdictOK             Verdict = "ok"
	VerdictNoMatch        Verdict = "no_match"
	VerdictBelowThreshold Verdict = "below_threshold"
)

type searchAnswer struct {
	Hits          []hitView     `json:"hits"`
	Verdict       Verdict       `json:"verdict"`
	StaleDropped  int           `json:"stale_dropped"`
	Mode          Mode          `json:"mode"`
	Barrier       Passed        `json:"barrier"`
	NextPageToken string        `json:"next_page_token,omitempty"`
	Namespaces    []string      `json:"namespaces"`
	RetrievalRisk retrievalRisk `json:"retrieval_risk"`
	Grounding     grounding     `json:"grounding"`
	Explain       *explain      `json:"explain,omitempty"`
	TraceID       string        `json:"trace_id,omitempty"`
	// PendingExtraction: a deferred extraction of the search's scope is not done yet,
	// so facts it will write are not among the hits.
	PendingExtraction bool `json:"pending_extraction"`
	// Evidence is the evidence legs' section: verbatim chunks and session digests that
	// answer the query, each citing its source (search_evidence.go); absent when the
	// legs were not asked for (a next page, evidence: false).
	Evidence *evidenceSection `json:"evidence,omitempty"`
	// Budget is what the page assembler's caps kept and cut (search_caps.go); absent
	// when the request set no cap.
	Budget *pageBudget `json:"budget,omitempty"`
}

// evidenceSection is the search answer's evidence: hits that are not memories.
type evidenceSection struct {
	Hits []evidenceHit `json:"hits"`
}

// explain is how the search went: its settled settings, the plan, the background and
// the verdict's gates, and what the reranker did.
type explain struct {
	Settings   retrievalSettings `json:"settings"`
	Plan       queryPlan         `json:"plan"`
	Background background        `json:"background"`
	Gates      []gate            `json:"gates"`
	Rerank     rerankOutcome     `json:"rerank"`
	HyDE       hydeOutcome       `json:"hyde"`
	// Anchor is what the date anchor pool read and added (anchor_pool.go).
	Anchor anchorOutcome `json:"anchor"`
	// EvidenceLegs are the evidence legs of a first page: whether each ran, and what it
	// scanned, matched and served.
	EvidenceLegs []evidenceLeg `json:"evidence_legs,omitempty"`
}

// Each leg ranks at least the settings' pool (LOOM_SEARCH_LEG_POOL), and
// legPoolPerHit per hit asked for: a row outside a leg's pool counts 0 for that leg,
// so a narrow pool loses rows two legs would agree on (the quality suite measured
// 0.04 recall@5 lost at 50).
const legPoolPerHit = 10

// served statuses by default; include_superseded adds the retired ones.
var defaultStatuses = []memrow.Status{memrow.StatusActive, memrow.StatusConflicted}

// searchPlan is a search settled: what it reads and how it ranks.
type searchPlan struct {
	req        *searchRequest
	f          filter
	namespaces []string // private first, then public
	public     map[string]bool
	terms      []string
	vector     []float32
	pool       int
	settings   retrievalSettings
	query      queryPlan
	whole      []*candidate // the whole query's pool: the background
	trace      *searchTrace // nil unless the request keeps a trace
	// sources are where each namespace's legs read, chosen at the barrier; generations
	// what the barrier captured.
	sources     map[string]legSource
	generations map[string]int64
	// capture is the barrier's capture, read with the namespaces' configuration (nil for
	// a next page); pendingExtraction what the same round trip read of the scope's
	// extraction requests, hasTurns whether the scope keeps any turn.
	capture           *Capture
	pendingExtraction bool
	hasTurns          bool
	// caps are the page assembler's caps (nil: none asked).
	caps *pageCaps
	// hyde is what HyDE did for the vector leg (hyde.go).
	hyde hydeOutcome
	// anchor is what the date anchor pool did (anchor_pool.go).
	anchor anchorOutcome
	// parked is a next page's parked pool, read with the namespaces' configuration (nil:
	// a first page, or a token unknown or expired).
	parked *parkedPage
}

// wantsEvidence is whether the search runs its evidence legs: a first page of the
// search route whose settings (the request's evidence over the namespace's) ask.
func (p *searchPlan) wantsEvidence() bool {
	return p.req.fromRoute && p.settings.Evidence
}

// recency reports whether the recency prior applies: asked, or the query's intent.
func (p *searchPlan) recency() bool { return p.settings.Recency || p.query.Recency }

// graphNames are the entity names the graph leg starts from: every run of the
// query's words, and the planner's entities as they read without their possessives.
func (p *searchPlan) graphNames() []string {
	out := queryEntityNames(p.req.Query)
	for _, e := range p.query.Entities {
		if n := memrow.EntityName(e); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// search is memory.search over the route's namespace ns and the request's others.
func (s *Service) search(ctx context.Context, p auth.Principal, ns string, req *searchRequest) (*searchAnswer, error) {
	plan, err := s.settle(ctx, p, ns, req)
	if err != nil {
		return nil, err
	}
	if plan.req.PageToken != "" {
		return s.nextPage(ctx, p, plan)
	}
	passed, err := s.waitForLegs(ctx, p.Org, plan)
	if err != nil {
		return nil, err
	}
	// The evidence legs read Postgres alone, beside the memory legs.
	var evidenceDone chan struct{}
	var ev *evidenceRun
	if plan.wantsEvidence() {
		evidenceDone = make(chan struct{})
		go func() {
			defer close(evidenceDone)
			ev = s.runEvidence(ctx, plan)
		}()
		defer func() { <-evidenceDone }()
	}
	if plan.vector, err = s.embedQuery(ctx, plan.req.Query); err != nil {
		return nil, err
	}
	plan.vector, plan.hyde = s.hyde(ctx, p.Org, plan, plan.vector)
	// Private namespaces first; public ones only when no private hit clears the floor.
	var private, public []string
	for _, ns := range plan.namespaces {
		if plan.public[ns] {
			public = append(public, ns)
		} else {
			private = append(private, ns)
		}
	}
	pool, whole, err := s.rankPool(ctx, plan, private)
	if err != nil {
		return nil, err
	}
	if pool, err = s.narrowPool(ctx, plan, pool); err != nil {
		return nil, err
	}
	if len(public) > 0 && (len(pool) == 0 || pool[0].relevance < s.cfg.MinScore) {
		more, moreWhole, err := s.rankPool(ctx, plan, public)
		if err != nil {
			return nil, err
		}
		if more, err = s.narrowPool(ctx, plan, more); err != nil {
			return nil, err
		}
		pool = append(pool, more...)
		whole = append(whole, moreWhole...)
		sortPool(pool)
	}
	plan.whole = whole
	plan.trace.fusion(pool)
	ans := &searchAnswer{Barrier: passed, Mode: plan.mode(), Namespaces: plan.namespaces}
	if err := s.servePage(ctx, plan, pool, 0, ans); err != nil {
		return nil, err
	}
	ans.PendingExtraction = plan.pendingExtraction
	if evidenceDone != nil {
		<-evidenceDone
		ans.Evidence = &evidenceSection{Hits: ev.hits}
		if ans.Explain != nil {
			ans.Explain.EvidenceLegs = ev.legs
		}
	}
	capPage(plan.caps, ans)
	s.recordRecalls(ctx, p.Org, ans.Hits)
	return ans, nil
}

// topKRefused is a top_k that is not an integer from 1 to LOOM_SEARCH_TOP_K_MAX, be it
// out of range, a fraction (2.5) or a number no integer holds (1e9).
func (s *Service) topKRefused() *httperr.Error {
	return httperr.Validation("top_k", fmt.Sprintf("top_k must be an integer from 1 to %d", s.cfg.TopKMax))
}

// settle checks the request and fixes what the search reads: its namespaces (each one
// the token reaches), the token's read scope, the filters and the ceiling on top_k.
func (s *Service) settle(ctx context.Context, p auth.Principal, ns string, req *searchRequest) (*searchPlan, error) {
	if err := s.checkSearchRequest(req); err != nil {
		return nil, err
	}
	statuses, err := searchStatuses(req)
	if err != nil {
		return nil, err
	}
	caps, err := s.settleCaps(req)
	if err != nil {
		return nil, err
	}
	list, err := searchNamespaces(p, ns, req.Namespaces)
	if err != nil {
		return nil, err
	}
	f := filter{org: p.Org, agent: req.Agent, userID: req.UserID, sessionID: req.SessionID, memoryType: req.MemoryType,
		tags: req.Tags, tagsAny: req.TagsMode == "any", statuses: statuses, asOf: req.AsOf}
	f.provenance = provenanceOf(req)
	f.userID = scopedUser(p, f.userID)
	f.sessionID = scopedSession(p, f.sessionID)
	f = f.withShared()
	page := uuid.Nil
	if req.PageToken != "" {
		if page, err = uuid.Parse(req.PageToken); err != nil {
			return nil, httperr.Validation("page_token", "not a page token")
		}
	}
	read, err := s.readSearchState(ctx, p.Org, list, f.userID, page, req.PageToken == "" && req.fromRoute && (req.Evidence == nil || *req.Evidence))
	if err != nil {
		return nil, err
	}
	if read.cfg.deleted != "" {
		return nil, deletedNamespace(read.cfg.deleted)
	}
	settings, err := s.settleRetrieval(read.cfg.defaults, req)
	if err != nil {
		return nil, err
	}
	q := planQuery(req.Query, s.referenceTime(req))
	if at, ok, err := s.sessionDate(ctx, p.Org, list, f, req, q); err != nil {
		return nil, err
	} else if ok {
		q = planQuery(req.Query, at)
	}
	plan := &searchPlan{req: req, f: f, namespaces: list, public: read.cfg.public, terms: dedupe(append(text.Terms(req.Query), q.DateTerms...)),
		pool: max(settings.Pool, req.TopK*legPoolPerHit), settings: settings, query: q, capture: read.capture, pendingExtraction: read.pending,
		hasTurns: read.hasTurns, caps: caps, parked: read.parked}
	if req.Trace {
		plan.trace = &searchTrace{Query: req.Query, Namespaces: list, Settings: settings, Plan: q, AsOf: req.AsOf, MemoryType: req.MemoryType}
	}
	return plan, nil
}

// referenceTime is what the query's relative dates are read against: the request's
// reference_time as written (its offset says which calendar day it is), else the
// planner's clock in UTC; a search of one session reads them against the session's
// date instead (sessionDate, anchor_pool.go).
func (s *Service) referenceTime(req *searchRequest) time.Time {
	if req.ReferenceTime != nil {
		return *req.ReferenceTime
	}
	return s.plannerNow().UTC()
}

// checkSearchRequest checks the query, top_k (defaulted), the modes and the filters'
// names and tags.
func (s *Service) checkSearchRequest(req *searchRequest) error {
	if req.Query == "" {
		return httperr.Validation("query", "query is required")
	}
	if n := utf8.RuneCountInString(req.Query); n > maxQueryChars {
		return httperr.Validation("query", fmt.Sprintf("query has %d characters; at most %d", n, maxQueryChars))
	}
	if req.TopK == 0 {
		req.TopK = s.cfg.TopKDefault
	}
	if req.TopK < 1 || req.TopK > s.cfg.TopKMax {
		return s.topKRefused()
	}
	switch req.Mode {
	case "", ModeWeighted, ModeRRF:
	default:
		return httperr.Validation("mode", "mode must be weighted or rrf")
	}
	switch req.TagsMode {
	case "", "all", "any":
	default:
		return httperr.Validation("tags_mode", "tags_mode must be all or any")
	}
	for _, f := range []struct{ name, v string }{{"agent", req.Agent}, {"user_id", req.UserID}, {"session_id", req.SessionID}} {
		if f.v != "" {
			if err := memrow.ValidateIdentity(f.name, f.v); err != nil {
				return err
			}
		}
	}
	if req.MemoryType != "" {
		if err := memrow.ValidateName("memory_type", req.MemoryType); err != nil {
			return err
		}
	}
	if err := checkProvenanceFilter(req); err != nil {
		return err
	}
	if len(req.Tags) > 0 {
		return memrow.ValidateTags(req.Tags)
	}
	return nil
}

// searchStatuses are the statuses a search serves: those asked (active and
// conflicted by default), and superseded when include_superseded asks.
func searchStatuses(req *searchRequest) ([]memrow.Status, error) {
	statuses := append([]memrow.Status(nil), defaultStatuses...)
	if len(req.Status) > 0 {
		statuses = nil
		for _, st := range req.Status {
			switch st {
			case memrow.StatusActive, memrow.StatusConflicted, memrow.StatusSuperseded, memrow.StatusDuplicate, memrow.StatusProposed:
				statuses = append(statuses, st)
			default:
				return nil, httperr.Validation("status", "status may hold active, conflicted, superseded, duplicate or proposed")
			}
		}
	}
	if req.IncludeSuperseded {
		statuses = append(statuses, memrow.StatusSuperseded)
	}
	return statuses, nil
}

// searchNamespaces are the route's namespace and the request's others, once each, every
// one the token reaches; at most 8.
func searchNamespaces(p auth.Principal, ns string, more []string) ([]string, error) {
	seen := map[string]bool{}
	var list []string
	for _, ns := range append([]string{ns}, more...) {
		if err := p.Namespace(ns); err != nil {
			return nil, err
		}
		if !seen[ns] {
			seen[ns] = true
			list = append(list, ns)
		}
	}
	if len(list) > 8 {
		return nil, httperr.Validation("namespaces", "a search reads at most 8 namespaces")
	}
	return list, nil
}

// searchState is what a search reads of Postgres before its legs: the namespaces'
// configuration and, for a first page, the barrier's capture, the namespace's
// calibration when not cached and whether an extraction of the scope is pending; for a
// next page, its parked pool.
type searchState struct {
	cfg      namespaceConfig
	capture  *Capture
	pending  bool
	hasTurns bool        // the scope keeps a turn (read only when the evidence legs may run)
	parked   *parkedPage // a next page's pool (nil: unknown or expired)
}

// readSearchState reads the search's state in one round trip: a first page's when page
// is uuid.Nil, else the next page's parked under page. An extraction pending at the
// capture writes facts the barrier does not cover.
func (s *Service) readSearchState(ctx context.Context, org string, namespaces []string, userID string, page uuid.UUID, evidenceLegs bool) (*searchState, error) {
	batch := &pgx.Batch{}
	var st searchState
	queueNamespaceSettings(batch, org, namespaces, &st.cfg)
	bctx, cancel := ctx, context.CancelFunc(func() {})
	if page != uuid.Nil {
		queueParkedPage(batch, org, page, &st.parked)
	} else {
		st.capture = s.barrier.QueueCapture(batch, org, namespaces)
		s.calibrations.queueOf(batch, calibrationKey{org, namespaces[0], s.embedder.Model()})
		if userID != noUser { // the token reads none of that user's rows, nor their requests
			extractqueue.QueuePending(batch, org, namespaces, userID, &st.pending)
			if evidenceLegs {
				evidence.QueueHasTurns(batch, org, namespaces, userID, &st.hasTurns)
			}
		}
		bctx, cancel = context.WithDeadline(ctx, st.capture.Deadline())
	}
	err := s.pool.SendBatch(bctx, batch).Close()
	cancel()
	if err != nil {
		return nil, httperr.Store("reading the namespaces' configuration and generations", err)
	}
	return &st, nil
}

func (p *searchPlan) mode() Mode {
	if p.req.Mode == "" {
		return ModeWeighted
	}
	return p.req.Mode
}

func dedupe(terms []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range terms {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// runLegs runs every leg over every namespace concurrently, and fuses them.
func (s *Service) runLegs(ctx context.Context, plan *searchPlan, namespaces []string) ([]*candidate, error) {
	if len(namespaces) == 0 {
		return nil, nil
	}
	legs, err := s.readLegs(ctx, plan, namespaces)
	if err != nil {
		return nil, err
	}
	for leg, hits := range legs {
		if !plan.settings.keeps(leg) {
			delete(legs, leg)
			continue
		}
		legs[leg] = slices.DeleteFunc(hits, func(h legHit) bool { return plan.f.hides(h.memoryType) })
	}
	plan.trace.legs(plan.req.Query, legs)
	return fuse(legs, plan.mode(), plan.settings.weights()), nil
}

// servePage validates the pool from offset on, one window at a time, until a page is
// full or one refill found nothing more; it parks the rest for the next page.
func (s *Service) servePage(ctx context.Context, plan *searchPlan, pool []*candidate, offset int, ans *searchAnswer) error {
	// The rest of the pool is parked in the round trip that reads the page's heads.
	var park *pagePark
	var also func(*pgx.Batch, int) error
	if plan.req.Paging {
		park = &pagePark{plan: plan, pool: pool, keys: s.kek}
		also = park.queue
	}
	hits, next, stale, err := s.validate(ctx, plan, pool, offset, plan.req.TopK, also)
	if err != nil {
		return httperr.Store("validating hits against their heads and parking the next page", err)
	}
	s.staleDropped.Add(float64(stale))
	ans.Hits, ans.StaleDropped = hits, stale
	if err := s.judge(ctx, plan, offset, ans); err != nil {
		return err
	}
	ans.NextPageToken = park.token(len(hits), next)
	return nil
}

func bestRelevance(hits []hitView) float64 {
	best := 0.0
	for _, h := range hits {
		best = max(best, h.Scores["relevance"])
	}
	return best
}
