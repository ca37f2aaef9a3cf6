package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/outbox"
	"github.com/loomplane/loom/internal/pg"
)

// rounds publishes rounds holding the publishers lock shared on the relay's lock session.
// The first round's read rides in the lock's round trip. A round ends with one more
// round trip: its delete of what Kafka acknowledged, the lock's release and, when rows
// already wait (the round was full, or a commit woke the relay during it), the next
// round's take of the lock and read. Before, a round's end took two round trips (the
// delete on a pooled connection, then the release) and the next round a third, each a
// wait for a commit that woke the relay meanwhile. The release between two rounds still
// lets an erasure's WaitOut through: a shared request queues behind an exclusive one.
// Rounds are chained only while stop has not ended; rounds returns the wake channel to
// wait on, taken before the last round's read.
func (r *Relay) rounds(ctx, stop context.Context, conn *pgxpool.Conn) (<-chan struct{}, error) {
	wake := r.wake.C()
	var pending []outbox.Row
	first := &pgx.Batch{}
	pg.QueueLockShared(first, pg.LockPublishers, nil)
	outbox.QueueReadPending(first, r.cfg.BatchRows, r.waiting(time.Now()), &pending)
	if err := conn.SendBatch(ctx, first).Close(); err != nil {
		pg.ReleaseShared(ctx, conn, pg.LockPublishers)
		return wake, fmt.Errorf("take the publishers lock shared and read the outbox: %w", err)
	}
	for {
		done, err := r.round(ctx, conn, pending)
		r.noteRound(err)
		var fault *faultStop
		if errors.As(err, &fault) {
			pg.ReleaseShared(ctx, conn, pg.LockPublishers)
			return wake, err
		}
		more := err == nil && stop.Err() == nil && (len(pending) == r.cfg.BatchRows || woken(wake))
		if more {
			wake = r.wake.C()
		}
		pending = nil
		if eerr := r.endRound(ctx, conn, done, more, &pending); err == nil {
			err = eerr
		}
		if err != nil || !more {
			return wake, err
		}
	}
}

// woken reports whether wake has fired.
func woken(wake <-chan struct{}) bool {
	select {
	case <-wake:
		return true
	default:
		return false
	}
}

// endRound deletes the rows Kafka acknowledged (done) and releases the publishers lock
// in one round trip on conn; with next, it takes the lock again and reads the next
// round's rows into into in the same round trip. The delete outlives a cancelled ctx:
// what Kafka acknowledged should not be sent again. Whatever fails, the lock is not
// left held.
func (r *Relay) endRound(ctx context.Context, conn *pgxpool.Conn, done []int64, next bool, into *[]outbox.Row) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	b := &pgx.Batch{}
	deleted, released, retaken := false, false, false
	if len(done) > 0 {
		// Its own transaction only when the next round's lock is taken after it: that
		// take may wait (an erasure's exclusive request goes first), and must not hold
		// the deleted rows meanwhile. Else it commits with the release, in the batch's
		// implicit transaction, on the lock session that commits asynchronously.
		outbox.QueueDelete(b, done, next, func() { deleted = true })
	}
	pg.QueueUnlockShared(b, pg.LockPublishers, func() { released = true })
	if next {
		pg.QueueLockShared(b, pg.LockPublishers, func() { retaken = true })
		outbox.QueueReadPending(b, r.cfg.BatchRows, r.waiting(time.Now()), into)
	}
	err := conn.SendBatch(dctx, b).Close()
	if !next && err == nil && len(done) > 0 {
		deleted = true
	}
	if deleted {
		r.published.Add(float64(len(done)))
	}
	if err == nil {
		return nil
	}
	if !released || retaken {
		pg.ReleaseShared(dctx, conn, pg.LockPublishers)
	}
	if !deleted && len(done) > 0 {
		return fmt.Errorf("delete published outbox rows: %w", err)
	}
	return fmt.Errorf("release the publishers lock and read the outbox: %w", err)
}
