package pgtest

import (
	"testing"
	"unsafe"

	"github.com/jackc/pgx/v5"
)

// ReadOnceAcrossBufferReuse checks that a cache keyed by a route's namespace keeps the
// namespace after the request's buffer is reused: fiber hands c.Params("ns") as a view
// of that buffer, which the next request (to another namespace) overwrites. queue is
// the cache's read: it queues the namespace's read on a miss and nothing on a hit. The
// first read, with a view of "notes-aa", must queue one read, answered as no row; the
// second, once the buffer holds "notes-bb", must queue none. lost is the failure when
// the cache read again.
func ReadOnceAcrossBufferReuse(t *testing.T, queue func(b *pgx.Batch, ns string), lost string) {
	t.Helper()
	buf := []byte("notes-aa")
	routeNS := unsafe.String(&buf[0], len(buf)) // what c.Params("ns") returns
	b := &pgx.Batch{}
	queue(b, routeNS)
	if len(b.QueuedQueries) != 1 {
		t.Fatalf("a namespace never read queued %d reads, want 1", len(b.QueuedQueries))
	}
	if err := b.QueuedQueries[0].Fn(NoRows{}); err != nil {
		t.Fatal(err)
	}
	copy(buf, "notes-bb") // the next request, to another namespace, in the same buffer
	again := &pgx.Batch{}
	queue(again, "notes-aa")
	if len(again.QueuedQueries) != 0 {
		t.Fatal(lost)
	}
}
