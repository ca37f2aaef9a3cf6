// Package command is the knowledge plane's write side: knowledge.add, upsert,
// bulk_add, delete and restore. Every operation ends in the one commit (commit.go),
// which locks the sources' heads, refuses the whole commit when one moved past the
// version its writer read, and writes each revision's head, its data key and its
// topic record (knowledge.document.*) to the outbox in one transaction, as memory's
// commit does. It imports no query package (docs/architecture.md).
package command

import (
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/idempotency"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/outbox"
	"github.com/loomplane/loom/internal/userref"
	"github.com/loomplane/loom/knowledge/parse"
)

// Limits bound a document write.
const (
	// MaxDocumentBytes is the largest document a write takes (413 DOCUMENT_TOO_LARGE).
	MaxDocumentBytes = 10 << 20
	// MaxExpandedBytes bounds what a compressed format may expand to.
	MaxExpandedBytes = 100 << 20
	// MaxPages bounds a paged format (PDF).
	MaxPages = 2000
	// MaxBulk is how many documents one bulk add takes.
	MaxBulk = 100
	// MaxSourceURIBytes bounds a source URI.
	MaxSourceURIBytes = 2048
	// MaxTags bounds a document's tags.
	MaxTags = 32
)

// Chunking follows the document's blocks (headings, paragraphs, table rows): a chunk
// holds at most ChunkTokens words and repeats the last ChunkOverlap of the one before.
const (
	ChunkTokens  = 256
	ChunkOverlap = 32
)

// Config is what the write side takes from the process's configuration.
type Config struct {
	Topic       string // LOOM_TOPIC: the records' topic
	EventSource string // LOOM_EVENT_SOURCE: their ce_source
	// IdempotencyLease is how long a write holds its Idempotency-Key
	// (LOOM_PG_REQUEST_LEASE_SECONDS; 0: a minute).
	IdempotencyLease time.Duration
	// MaxRecordBytes is the largest record the topic takes (LOOM_TOPIC_MAX_RECORD_BYTES;
	// 0: no bound): a document whose record runs past it is refused, not committed to
	// be parked by the relay and never searched.
	MaxRecordBytes int
}

// Service is the knowledge plane's write side.
type Service struct {
	cfg      Config
	pool     *pgxpool.Pool
	embedder embed.Embedder
	keys     *kek.Ring
	refs     *userref.Keys // the orgs' keys the topic names users by
	wake     *outbox.Waker // nil: no relay in process to wake
	log      *slog.Logger
	idem     *idempotency.Store // the Idempotency-Keys of the writes
	limits   parse.Limits
	// ingestWake wakes this process's ingest workers when a job is submitted.
	ingestWake chan struct{}
}

// New builds the write side: it commits to pool, embeds chunks with embedder (the
// memory plane's), wraps data keys under keys and wakes the relays through wake.
func New(cfg Config, pool *pgxpool.Pool, embedder embed.Embedder, keys *kek.Ring, wake *outbox.Waker, log *slog.Logger) *Service {
	s := &Service{cfg: cfg, pool: pool, embedder: embedder, keys: keys, refs: userref.New(pool, keys), wake: wake, log: log,
		limits:     parse.Limits{MaxBytes: MaxDocumentBytes, MaxExpandedBytes: MaxExpandedBytes, MaxPages: MaxPages},
		ingestWake: make(chan struct{}, 1)}
	s.idem = newIdempotency(s)
	return s
}

// Register mounts the write routes; the process authenticates them (cmd/loomd/app).
func (s *Service) Register(r fiber.Router) {
	g := r.Group("/v1")
	g.Post("/namespaces/:ns/knowledge", s.handleAdd)
	g.Put("/namespaces/:ns/knowledge", s.handleUpsert)
	g.Post("/namespaces/:ns/knowledge\\:bulkAdd", s.handleBulkAdd)
	g.Delete("/namespaces/:ns/knowledge/document", s.handleDelete)
	g.Post("/namespaces/:ns/knowledge/document\\:restore", s.handleRestore)
	g.Post("/namespaces/:ns/knowledge/ingestions", s.handleIngest)
	g.Post("/namespaces/:ns/knowledge/ingestions/:ingestion_id\\:cancel", s.handleIngestCancel)
	g.Post("/namespaces/:ns/knowledge/datasets\\:approve", s.handleApproveDataset)
}
