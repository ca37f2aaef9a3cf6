// Package query is Loom's read side: point reads answer from the Postgres heads and
// history from the Postgres journal (read-your-writes at the commit); search and the
// other reads of ClickHouse wait behind the generation barrier, and every search hit is
// checked against its Postgres head.
package query

import (
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/metrics"
	"github.com/loomplane/loom/internal/searchindex"
	"github.com/loomplane/loom/internal/userref"
)

// settings is the read side's section of loomd's configuration, its leg weights as
// fusion takes them.
type settings struct {
	config.Query
	Weights Weights
}

// Service holds the read side's dependencies.
type Service struct {
	cfg      settings
	recalls  recallCounts // served hits gathered for the next exposures insert
	pool     *pgxpool.Pool
	ch       *ch.Conn
	barrier  *Barrier
	embedder *cachedEmbedder
	// index is the process's search index: the vector, chunk, lexical and key legs of a
	// namespace it holds read it. nil: ClickHouse serves every leg.
	index *searchindex.Index
	// indexLegs and clickhouseLegs are the two sources a namespace's legs read
	// (leg_source.go); indexLegs is nil without an index.
	indexLegs      legSource
	clickhouseLegs legSource
	log            *slog.Logger
	now            func() time.Time
	// plannerNow is the clock relative times in queries are read against.
	plannerNow   func() time.Time
	reranker     Reranker
	calibrations *calibrations

	searches     *metrics.CounterVec
	searchTime   *metrics.Histogram
	staleDropped *metrics.Counter
	reranks      *metrics.CounterVec
	legReads     *metrics.CounterVec
	hydes        *metrics.CounterVec // HyDE's calls by outcome (hyde.go)

	// model answers memory.ask; nil or unconfigured, ask answers LLM_NOT_CONFIGURED.
	model            *llm.Provider
	asks             *metrics.CounterVec
	citationsDropped *metrics.Counter

	// The layers context.pack reads from other planes (context_sources.go); nil: the
	// layer is empty and said to be unavailable.
	sessions  SessionSource
	profiles  ProfileSource
	knowledge KnowledgeSource
	// tokenizers count context.pack's budgets (pack_tokenizer.go).
	tokenizers *tokenizers
	// keys opens stored data keys (nil: none wrapped).
	kek *kek.Ring
	// termKeys are the orgs' keys memory.recall hashes a question's terms under
	// (evidence.TermKey), as the write side hashed the turns'.
	termKeys *userref.Keys
}

// Option changes how New builds the read side.
type Option func(*Service)

// WithModel gives memory.ask its model provider.
func WithModel(p *llm.Provider) Option { return func(s *Service) { s.model = p } }

// WithSearchIndex serves search's vector, chunk, lexical and key legs from the
// process's search index, for the namespaces it holds (nil: from ClickHouse). The
// barrier must wait on the same index (NewBarrier's WithIndex).
func WithSearchIndex(x *searchindex.Index) Option { return func(s *Service) { s.index = x } }

// WithReranker reranks searches that ask (or whose settings do) with r.
func WithReranker(r Reranker) Option { return func(s *Service) { s.reranker = r } }

// WithPlannerClock reads a query's relative times ("last week") against now.
func WithPlannerClock(now func() time.Time) Option { return func(s *Service) { s.plannerNow = now } }

// WithKeys is the ring the stored data keys are wrapped under: the evidence legs open
// the chunks they match in Go (search_evidence.go). Without it only raw keys open.
func WithKeys(r *kek.Ring) Option { return func(s *Service) { s.kek = r } }

// New returns the read side, configured by its section as it is; barrier must be
// running its listener.
func New(cfg config.Query, pool *pgxpool.Pool, conn *ch.Conn, barrier *Barrier, embedder embed.Embedder, reg *metrics.Registry, log *slog.Logger,
	opts ...Option) *Service {
	s := &Service{
		cfg: settings{Query: cfg, Weights: Weights(cfg.Weights)}, pool: pool, ch: conn, barrier: barrier, log: log, now: time.Now,
		plannerNow:   time.Now,
		calibrations: newCalibrations(pool),
		tokenizers:   newTokenizers(packCountCache),
		embedder:     newCachedEmbedder(embedder, cfg.EmbedCacheSize, cfg.EmbedCacheTTL, reg),
		searches:     reg.Counter("loom_searches_total", "Searches by verdict.", "verdict"),
		searchTime:   reg.Histogram("loom_search_seconds", "Search latency, barrier included.", nil).With(),
		staleDropped: reg.Counter("loom_search_stale_dropped_total", "Search hits dropped because their Postgres head moved on.").With(),
		reranks:      reg.Counter("loom_search_reranks_total", "Reranked search pages by outcome (reordered, kept, failed).", "outcome"),
		hydes:        reg.Counter("loom_search_hyde_total", "Searches whose vector leg HyDE asked a model for, by outcome (used, failed).", "outcome"),
		legReads:     reg.Counter("loom_search_namespace_reads_total", "Namespaces a search's legs read, by where they read them: index or clickhouse.", "source"),
		asks:         reg.Counter("loom_asks_total", "memory.ask calls by outcome (answered, abstained, error).", "outcome"),
		citationsDropped: reg.Counter("loom_ask_citations_dropped_total",
			"Citations of memory.ask answers that named no memory of the pool, dropped.").With(),
	}
	for _, o := range opts {
		o(s)
	}
	s.termKeys = userref.New(pool, s.kek)
	// The conversation's record and the structured profiles are the read side's own;
	// knowledge comes from the plane through WithKnowledgeSource.
	if s.sessions == nil {
		s.sessions = s
	}
	if s.profiles == nil {
		s.profiles = profileRows{s}
	}
	s.clickhouseLegs = clickhouseLegs{ch: conn, k1: cfg.BM25K1, b: cfg.BM25B}
	for _, outcome := range []string{"used", "failed"} { // exported at 0 from the start (deploy/CONFIG.md names it)
		s.hydes.With(outcome)
	}
	if s.index != nil {
		s.indexLegs = indexLegs{index: s.index, k1: cfg.BM25K1, b: cfg.BM25B, now: s.now}
	}
	return s
}

// Register mounts the read routes; the process authenticates them (cmd/loomd/app).
func (s *Service) Register(r fiber.Router) {
	g := r.Group("/v1")
	g.Post("/namespaces/:ns/memories\\:search", s.handleSearch)
	g.Post("/namespaces/:ns/memories\\:ask", s.handleAsk)
	g.Post("/namespaces/:ns/memories\\:recall", s.handleRecall)
	g.Get("/namespaces", s.handleNamespaces)
	g.Get("/namespaces/:ns/memories", s.handleList)
	g.Get("/namespaces/:ns/keys", s.handleKeys)
	g.Get("/namespaces/:ns/memories/:key/history", s.handleHistory)
	g.Get("/namespaces/:ns/memories/:key", s.handleGet)
	g.Get("/memories/:id", s.handleGetByID)
	g.Get("/namespaces/:ns/graph/entities/:name", s.handleEntity)
	g.Get("/namespaces/:ns/audit", s.handleNamespaceAudit)
	g.Get("/namespaces/:ns/extractions", s.handleExtractionStatus)
	g.Get("/extractions", s.handleMyExtractions)
	g.Get("/extractions/:queue_id", s.handleMyExtractions)
	g.Post("/namespaces/:ns/memories\\:bulkGet", s.handleBulkGet)
	g.Post("/namespaces/:ns\\:snapshot", s.handleSnapshot)
	g.Get("/exports", s.handleExport)
	g.Get("/search-traces/:trace_id", s.handleSearchTrace)
	// Structured profiles (profile.go, profile_render.go).
	g.Get("/namespaces/:ns/profiles/:user_id", s.handleProfile)
	g.Get("/namespaces/:ns/profiles/:user_id/render", s.handleProfileRender)
	// What an agent reads before it answers (context_pack.go, stack.go, timeline.go,
	// related.go, aggregate.go, statuses.go).
	g.Post("/namespaces/:ns/context\\:pack", s.handleContextPack)
	g.Post("/namespaces/:ns/context\\:stack", s.handleStack)
	g.Get("/namespaces/:ns/timeline", s.handleTimeline)
	g.Get("/namespaces/:ns/memories/:key/related", s.handleRelated)
	g.Get("/namespaces/:ns/memories\\:aggregate", s.handleAggregate)
	g.Post("/namespaces/:ns/memories\\:statuses", s.handleStatuses)
	g.Get("/namespaces/:ns/inventory", s.handleInventory)
	g.Get("/namespaces/:ns/categories", s.handleCategories)
	g.Get("/namespaces/:ns/memories/:key/inspect", s.handleInspect)
	// A session's newest digest (session_digest.go).
	g.Get("/namespaces/:ns/sessions/:session_id/digest", s.handleSessionDigest)
	// The learnings queue: rules about the agent itself (learnings.go).
	g.Get("/namespaces/:ns/learnings", s.handleLearnings)
}
