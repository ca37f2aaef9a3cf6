package command

import (
	"testing"
	"unsafe"

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
	buf := []byte("notes-aa")
	routeNS := unsafe.String(&buf[0], len(buf)) // what c.Params("ns") returns
	b := &pgx.Batch{}
	s.queueJudgingCalibration(b, "acme", routeNS)
	if len(b.QueuedQueries) != 1 {
		t.Fatalf("a namespace never read queued %d reads, want 1", len(b.QueuedQueries))
	}
	if err := b.QueuedQueries[0].Fn(pgtest.NoRows{}); err != nil {
		t.Fatal(err)
	}
	copy(buf, "notes-bb") // the next request, to another namespace, in the same buffer
	again := &pgx.Batch{}
	s.queueJudgingCalibration(again, "acme", "notes-aa")
	if len(again.QueuedQueries) != 0 {
		t.Fatal("the namespace's thresholds were read again: the cache lost them when the request's buffer was reused")
	}
}
