package query

import (
	"testing"
	"unsafe"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/pgtest"
)

// A namespace's calibration, once read, stays cached after the search that named it:
// fiber hands a route's namespace as a view of the request's buffer, which the next
// request (to another namespace) overwrites. Kept with that view, the cache's key
// changed under it and the namespace's calibration was read again.
func TestACalibrationStaysCachedAfterTheRequestBufferIsReused(t *testing.T) {
	c := newCalibrations(nil)
	buf := []byte("notes-aa")
	routeNS := unsafe.String(&buf[0], len(buf)) // what c.Params("ns") returns
	b := &pgx.Batch{}
	c.queueOf(b, calibrationKey{"acme", routeNS, "hash-v1-8"})
	if len(b.QueuedQueries) != 1 {
		t.Fatalf("a namespace never read queued %d reads, want 1", len(b.QueuedQueries))
	}
	if err := b.QueuedQueries[0].Fn(pgtest.NoRows{}); err != nil {
		t.Fatal(err)
	}
	copy(buf, "notes-bb") // the next request, to another namespace, in the same buffer
	again := &pgx.Batch{}
	c.queueOf(again, calibrationKey{"acme", "notes-aa", "hash-v1-8"})
	if len(again.QueuedQueries) != 0 {
		t.Fatal("the namespace's calibration was read again: the cache lost it when the request's buffer was reused")
	}
}
