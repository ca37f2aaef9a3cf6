package query

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/pgtest"
)

// A namespace's calibration, once read, stays cached after the search that named it:
// fiber hands a route's namespace as a view of the request's buffer, which the next
// request (to another namespace) overwrites. Kept with that view, the cache's key
// changed under it and the namespace's calibration was read again.
func TestACalibrationStaysCachedAfterTheRequestBufferIsReused(t *testing.T) {
	c := newCalibrations(nil)
	pgtest.ReadOnceAcrossBufferReuse(t, func(b *pgx.Batch, ns string) { c.queueOf(b, calibrationKey{"acme", ns, "hash-v1-8"}) },
		"the namespace's calibration was read again: the cache lost it when the request's buffer was reused")
}
