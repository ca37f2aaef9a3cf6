package command

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/pgtest"
)

// A namespace's thresholds, once read, are kept for the namespace even after the
// request that named it is gone: fiber hands a route's namespace as a view of the
// request's buffer, which the next request (to another namespace) overwrites. Read with
// that view, the cache's key changed under it, and every write re-read the thresholds
// once writes to other namespaces came between (0.2–0.3 reads a write at 32 namespaces).
func TestJudgingThresholdsStayCachedAfterTheRequestBufferIsReused(t *testing.T) {
	s := &Service{embedder: embed.NewHash(8), judging: newJudgingCalibrations()}
	s.cfg.ConflictCalibration.Enabled = true
	pgtest.ReadOnceAcrossBufferReuse(t, func(b *pgx.Batch, ns string) { s.queueJudgingCalibration(b, "acme", ns) },
		"the namespace's thresholds were read again: the cache lost them when the request's buffer was reused")
}
