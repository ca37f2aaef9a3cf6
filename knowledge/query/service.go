// Package query is the knowledge plane's read side: knowledge.get and knowledge.list
// from the heads in Postgres, knowledge.search from the process's chunk index
// (knowledge/index) behind a barrier on the namespace's generation, each page checked
// against the heads in one Postgres read before it ranks, and knowledge.outline from
// the head. It imports no command package (docs/architecture.md).
package query

import (
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/knowledge/index"
)

// Service is the knowledge plane's read side.
type Service struct {
	pool     *pgxpool.Pool
	index    *index.Index
	embedder embed.Embedder
	// wait bounds a search's wait for the index to apply what was committed before it
	// (LOOM_PG_PROJECTION_WAIT_MS, as memory's barrier).
	wait time.Duration
	log  *slog.Logger
	// model answers knowledge.synthesize (nil: it answers 503 as unconfigured).
	model *llm.Provider
}

// New builds the read side over pool, the process's chunk index and the embedder the
// chunks were embedded with.
func New(pool *pgxpool.Pool, idx *index.Index, embedder embed.Embedder, wait time.Duration, log *slog.Logger) *Service {
	return &Service{pool: pool, index: idx, embedder: embedder, wait: wait, log: log}
}

// UseModel gives knowledge.synthesize its model provider (the process's).
func (s *Service) UseModel(m *llm.Provider) { s.model = m }

// Register mounts the read routes; the process authenticates them (cmd/loomd/app).
func (s *Service) Register(r fiber.Router) {
	g := r.Group("/v1")
	g.Get("/namespaces/:ns/knowledge", s.handleList)
	g.Get("/namespaces/:ns/knowledge/document", s.handleGet)
	g.Get("/namespaces/:ns/knowledge/outline", s.handleOutline)
	g.Post("/namespaces/:ns/knowledge\\:search", s.handleSearch)
	g.Get("/namespaces/:ns/knowledge/ingestions/:ingestion_id", s.handleIngestStatus)
	g.Post("/namespaces/:ns/knowledge\\:synthesize", s.handleSynthesize)
	g.Get("/namespaces/:ns/knowledge/inspect", s.handleInspect)
	g.Get("/namespaces/:ns/knowledge/datasets", s.handleDatasetGet)
	g.Post("/namespaces/:ns/knowledge/datasets\\:query", s.handleQuery)
}
