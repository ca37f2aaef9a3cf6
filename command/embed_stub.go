package command

import (
	"context"
	"errors"

	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/memrow"
)

// Embedding stubs (memory-architecture, "Embedding stubs"). A writer that can wait for
// a vector (namespace.restore, namespace.rollback, memory.restore) commits its rows
// without one while the embedder is unavailable, rather than failing: the row is a stub
// (embedding_dim 0, no vector on the topic), served lexically and by key, never by the
// vector leg, and never a peer (every vector read filters embedding_dim > 0). The
// embedding worker (workers/embedding_worker.go) fills it through the one commit when
// the embedder answers again. memory.set and its kin still embed before they commit:
// their verdict needs the vector.

// embedRowsOrStub embeds the rows' values; when the embedder is unavailable it leaves
// every row a stub instead and reports how many it left.
func (s *Service) embedRowsOrStub(ctx context.Context, ps []*pending) (int, error) {
	err := s.embedRows(ctx, ps)
	if err == nil || !errors.Is(err, embed.ErrEmbedderUnavailable) {
		return 0, err
	}
	stubs := 0
	for _, p := range ps {
		p.vector, p.keyVector, p.chunkVectors = nil, nil, nil
		if p.row.Embedded() {
			p.row.EmbeddingModel, p.row.EmbeddingDim = "", 0
			if !p.row.Tombstone && !p.row.Redacted {
				stubs++
			}
		}
	}
	s.log.Warn("embedder unavailable: rows committed as embedding stubs for the embedding worker", "rows", stubs)
	return stubs, nil
}

// IsStub reports whether a row owes the embedding worker its vector: a live value of a
// searchable type and tier with no vector.
func IsStub(r *memrow.Row) bool {
	return r != nil && !r.Tombstone && !r.Redacted && r.Embedded() && r.EmbeddingDim == 0 && len(r.Value) > 0
}
