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

// rounds publishes rounds, each holding the publishers lock shared on a session of the
// relay's from its read until its delete. The first round's read rides in the lock's
// round trip. A round ends with one more round trip: its delete of what Kafka
// acknowledged, the lock's release and, when rows already wait (the round was full, or
// a commit woke the relay during it) and no round is read meanwhile, the next round's
// take of the lock and read. The release between two rounds on a session lets an
// erasure's WaitOut through: a shared request queues behind an exclusive one.
//
// A commit that wakes the relay while a round waits for Kafka's answer does not wait
// for that answer and the round's delete: the next round is read on the relay's other
// session (its spare), excluding the rows in flight, and handed to the producer at once,
// which produces it after the round before on every partition. At most two rounds are
// in flight, one a session, so each session's lock is released between its rounds as
// before. A round ends only after the one before it, so a namespace with a record that
// failed in a round keeps every later record of the next round too (they go again after
// it, as within a round), and once a round failed the next is not read until both
// ended. A round with a row refused before (which goes alone, waiting for its answer)
// waits for the round before it to end first, and with WaitForStandbys rounds do not
// overlap (the standbys' check reads the lock session's server).
//
// Rounds are chained only while stop has not ended; rounds returns the wake channel to
// wait on, taken before the last round's read.
func (r *Relay) rounds(ctx, stop context.Context, conn *pgxpool.Conn) (<-chan struct{}, error) {
	wake := r.wake.C()
	var pending []outbox.Row
	first := &pgx.Batch{}
	pg.QueueLockShared(first, pg.LockPublishers, nil)
	outbox.QueueReadPending(first, r.cfg.BatchRows, r.waiting(time.Now()), nil, &pending)
	if err := conn.SendBatch(ctx, first).Close(); err != nil {
		pg.ReleaseShared(ctx, conn, pg.LockPublishers)
		return wake, fmt.Errorf("take the publishers lock shared and read the outbox: %w", err)
	}
	lane := conn // the session pending was read on, holding the publishers lock for it
	var older *flight
	failed := map[string]bool{} // namespaces with a failed record in a round not yet ended
	// endOlder ends the round in flight before the current one, if any.
	endOlder := func() error {
		if older == nil {
			return nil
		}
		f := older
		older = nil
		return r.end(ctx, f, failed, false, nil)
	}
	for {
		if refusedBefore(pending) {
			if err := endOlder(); err != nil {
				pg.ReleaseShared(ctx, lane, pg.LockPublishers)
				return wake, err
			}
		}
		cur, err := r.begin(ctx, lane, pending)
		r.noteRound(err)
		if err != nil {
			if eerr := endOlder(); eerr != nil && isFault(eerr) {
				err = eerr
			}
			pg.ReleaseShared(ctx, lane, pg.LockPublishers)
			return wake, err
		}
		// endCur ends cur after a failure ended the rounds before it.
		endCur := func(err error) error {
			if isFault(err) {
				pg.ReleaseShared(ctx, cur.lane, pg.LockPublishers)
			} else if eerr := r.end(ctx, cur, failed, false, nil); isFault(eerr) {
				err = eerr
			}
			return err
		}
		more := stop.Err() == nil && len(pending) == r.cfg.BatchRows
		overlap := !r.cfg.WaitForStandbys && len(cur.rows) > 0
		if overlap && !more && stop.Err() == nil {
			select {
			case <-cur.answered:
			case <-wake:
				more = true
			}
		}
		if more && overlap {
			w := r.wake.C()
			var rows []outbox.Row
			var took bool
			next := r.otherLane(ctx, lane, conn)
			if older != nil {
				// The round before cur ends in the next round's read, on its session.
				f := older
				older, next = nil, f.lane
				done, err := r.settle(ctx, f, failed)
				if isFault(err) {
					pg.ReleaseShared(ctx, f.lane, pg.LockPublishers)
					return wake, endCur(err)
				}
				if err == nil && len(failed) == 0 {
					took, err = r.endRoundTrying(ctx, f.lane, done, cur.ids(), &rows)
				} else if eerr := r.endRound(ctx, f.lane, done, false, nil); err == nil {
					err = eerr
				} else {
					return wake, endCur(err) // Kafka is away
				}
				if err != nil && f.lane == conn {
					return wake, endCur(err) // the lock session is gone, and the relay lock with it
				}
				if err != nil {
					r.log.Warn("relay: cannot end a round on the second session; rounds wait for each other", "err", err)
					r.dropSpare()
				}
			} else if next != nil {
				took, err = r.tryReadOn(ctx, next, cur.ids(), &rows)
				if err != nil && next == conn {
					return wake, endCur(err)
				}
				if err != nil {
					r.log.Warn("relay: cannot read a round on the second session; rounds wait for each other", "err", err)
					r.dropSpare()
				}
			}
			if took {
				r.overlaps.Inc()
				wake, pending = w, rows
				older, lane = cur, next
				continue
			}
			// An erasure waits for the publishers lock, a namespace failed, or the other
			// session is not to be had: this round ends before the next is read.
		}
		if err := endOlder(); err != nil {
			return wake, endCur(err)
		}
		more = stop.Err() == nil && (more || woken(wake))
		if more {
			wake = r.wake.C()
		}
		pending = nil
		err = r.end(ctx, cur, failed, more, &pending)
		clear(failed)
		if err != nil || !more {
			return wake, err
		}
		lane = cur.lane
	}
}

func isFault(err error) bool {
	var fault *faultStop
	return errors.As(err, &fault)
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

// end waits for the answers of f's records and ends its round on its lane: the delete
// of what Kafka acknowledged and the release of the publishers lock and, with next, the
// next round's lock and read into into (endRound). Kafka being away ends no round with
// a read. A fault stops the relay where it is: published, not deleted.
func (r *Relay) end(ctx context.Context, f *flight, failed map[string]bool, next bool, into *[]outbox.Row) error {
	done, err := r.settle(ctx, f, failed)
	if isFault(err) {
		pg.ReleaseShared(ctx, f.lane, pg.LockPublishers)
		return err
	}
	if eerr := r.endRound(ctx, f.lane, done, next && err == nil, into); err == nil {
		err = eerr
	}
	return err
}

// otherLane is the session a round is read on while the one read on lane is in flight:
// the relay's spare when lane is the lock session, else the lock session. A spare
// that cannot be had leaves nil, and the read on it fails.
func (r *Relay) otherLane(ctx context.Context, lane, lockConn *pgxpool.Conn) *pgxpool.Conn {
	if lane != lockConn {
		return lockConn
	}
	if r.spare == nil {
		conn, err := r.pool.Acquire(ctx)
		if err != nil {
			r.log.Warn("relay: cannot acquire a second session; rounds wait for each other", "err", err)
			return nil
		}
		// Its only writes are the rounds' deletes, as on the lock session; it is closed,
		// never pooled again, with the lock.
		if _, err := conn.Exec(ctx, "SELECT "+outbox.SessionCommitsAsync); err != nil {
			closeSession(conn)
			r.log.Warn("relay: cannot set up a second session; rounds wait for each other", "err", err)
			return nil
		}
		r.spare = conn
	}
	return r.spare
}

// dropSpare closes the spare session, releasing whatever it holds.
func (r *Relay) dropSpare() {
	if r.spare != nil {
		closeSession(r.spare)
		r.spare = nil
	}
}

func closeSession(conn *pgxpool.Conn) {
	conn.Conn().Close(context.Background())
	conn.Release()
}

// tryReadOn takes the publishers lock shared on conn if no exclusive request waits
// for it, and then reads the oldest rows waiting, leaving out sent (the round in
// flight), into into, in one round trip. It does not wait for the lock: the round in
// flight holds it on the other session until this goroutine ends it, and an erasure
// waiting for it exclusively would make a shared request wait for ever behind it.
// Not taken, what was read is dropped.
func (r *Relay) tryReadOn(ctx context.Context, conn *pgxpool.Conn, sent []int64, into *[]outbox.Row) (bool, error) {
	var took bool
	var rows []outbox.Row
	b := &pgx.Batch{}
	pg.QueueTryLockShared(b, pg.LockPublishers, &took)
	outbox.QueueReadPending(b, r.cfg.BatchRows, r.waiting(time.Now()), sent, &rows)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		pg.ReleaseShared(ctx, conn, pg.LockPublishers)
		return false, fmt.Errorf("try the publishers lock shared and read the outbox: %w", err)
	}
	if took {
		*into = rows
	}
	return took, nil
}

// endRoundTrying ends a round as endRound does and, in the same round trip, tries the
// publishers lock shared again and reads the next round's rows, leaving out sent (the
// round in flight on the other session), into into. The take does not wait (tryReadOn
// says why), so the delete commits with the rest, in the batch's implicit transaction.
// Not taken, what was read is dropped. Whatever fails, the lock is not left held.
func (r *Relay) endRoundTrying(ctx context.Context, conn *pgxpool.Conn, done, sent []int64, into *[]outbox.Row) (bool, error) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var took bool
	var rows []outbox.Row
	b := &pgx.Batch{}
	if len(done) > 0 {
		outbox.QueueDelete(b, done, false, nil)
	}
	pg.QueueUnlockShared(b, pg.LockPublishers, nil)
	pg.QueueTryLockShared(b, pg.LockPublishers, &took)
	outbox.QueueReadPending(b, r.cfg.BatchRows, r.waiting(time.Now()), sent, &rows)
	if err := conn.SendBatch(dctx, b).Close(); err != nil {
		// Held once at most: the round's lock before its release, or the one taken after.
		pg.ReleaseShared(dctx, conn, pg.LockPublishers)
		return false, fmt.Errorf("delete published outbox rows, release the publishers lock and read the outbox: %w", err)
	}
	r.published.Add(float64(len(done)))
	if took {
		*into = rows
	}
	return took, nil
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
		// implicit transaction, on a session that commits asynchronously.
		outbox.QueueDelete(b, done, next, func() { deleted = true })
	}
	pg.QueueUnlockShared(b, pg.LockPublishers, func() { released = true })
	if next {
		pg.QueueLockShared(b, pg.LockPublishers, func() { retaken = true })
		outbox.QueueReadPending(b, r.cfg.BatchRows, r.waiting(time.Now()), nil, into)
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
