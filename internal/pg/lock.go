package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Advisory lock keys. Each names one deployment-wide role or critical section.
const (
	LockPGMigrations int64 = 0x4c4f4f4d_0001 // "LOOM" 1
	LockCHMigrations int64 = 0x4c4f4f4d_0002
	LockRelay        int64 = 0x4c4f4f4d_0003
	LockAuthority    int64 = 0x4c4f4f4d_0004 // recording the deployment at first boot
	// LockPublishers is held shared by every relay round and every projector batch
	// that opens sealed content, from its read until its writes returned. An erasure
	// or a redaction takes it exclusively once (WaitOut) to wait out the publishers
	// that read what it destroyed before it committed.
	LockPublishers int64 = 0x4c4f4f4d_0005
	// LockServingTables is held shared by every projector batch and repair that reads
	// or writes the serving projection tables, from its first read of them until its
	// watermarks are written. A rebuild's switch holds it exclusively while it renames
	// the tables, so no batch straddles the rename.
	LockServingTables int64 = 0x4c4f4f4d_0006
	// LockRebuild is held by the one process building, abandoning or dropping a
	// generation of the projection tables.
	LockRebuild int64 = 0x4c4f4f4d_0007
)

// HoldShared runs fn while conn's session holds key shared. The lock is released when
// fn returns, even when ctx was cancelled meanwhile; a session that cannot release it
// is closed, which releases it.
func HoldShared(ctx context.Context, conn *pgxpool.Conn, key int64, fn func() error) error {
	return HoldSharedWith(ctx, conn, key, nil, fn)
}

// HoldSharedWith is HoldShared with first's statements sent in the lock's own round
// trip, run once the lock is taken (a relay round's read of the outbox). A session
// advisory lock outlives the batch's implicit transaction, failed or not, so it is
// released in every case.
func HoldSharedWith(ctx context.Context, conn *pgxpool.Conn, key int64, first *pgx.Batch, fn func() error) error {
	b := &pgx.Batch{}
	QueueLockShared(b, key, nil)
	if first != nil {
		b.QueuedQueries = append(b.QueuedQueries, first.QueuedQueries...)
	}
	defer ReleaseShared(ctx, conn, key)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("take advisory lock %x shared: %w", key, err)
	}
	return fn()
}

// QueueLockShared queues on b the wait for key shared; taken, if not nil, is called
// once the session holds it. A shared request queues behind an exclusive one already
// waiting, so a session that releases the lock and takes it again in one round trip
// (QueueUnlockShared, then this) still lets a WaitOut through between the two.
func QueueLockShared(b *pgx.Batch, key int64, taken func()) {
	q := b.Queue("SELECT pg_advisory_lock_shared($1)", key)
	if taken != nil {
		q.Exec(func(pgconn.CommandTag) error { taken(); return nil })
	}
}

// QueueUnlockShared queues on b the release of key held shared; released, if not nil,
// is called once it is released.
func QueueUnlockShared(b *pgx.Batch, key int64, released func()) {
	q := b.Queue("SELECT pg_advisory_unlock_shared($1)", key)
	if released != nil {
		q.Exec(func(pgconn.CommandTag) error { released(); return nil })
	}
}

// ReleaseShared releases key held shared by conn's session, even when ctx was
// cancelled, first rolling back a transaction a failed batch left open; a session
// that cannot release it is closed, which releases it. Releasing a lock the session
// does not hold is harmless.
func ReleaseShared(ctx context.Context, conn *pgxpool.Conn, key int64) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if conn.Conn().PgConn().TxStatus() != 'I' {
		if _, err := conn.Exec(uctx, "ROLLBACK"); err != nil {
			conn.Conn().Close(uctx)
			return
		}
	}
	if _, err := conn.Exec(uctx, "SELECT pg_advisory_unlock_shared($1)", key); err != nil {
		conn.Conn().Close(uctx)
	}
}

// WaitOut returns once every session that held key shared when it was called has
// released it: it takes key exclusively on a connection of its own and releases it
// at once. Shared requests made meanwhile wait behind it, briefly.
func WaitOut(ctx context.Context, pool *pgxpool.Pool, key int64) error {
	unlock, err := SessionLock(ctx, pool, key)
	if err != nil {
		return err
	}
	unlock()
	return nil
}

// SessionLock waits for a session advisory lock on a connection of its own and
// returns the function that releases it (and the connection).
func SessionLock(ctx context.Context, pool *pgxpool.Pool, key int64) (func(), error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire a connection for advisory lock %x: %w", key, err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		conn.Release()
		return nil, fmt.Errorf("take advisory lock %x: %w", key, err)
	}
	return releaser(conn, key), nil
}

// releaser releases a session advisory lock and the connection holding it.
func releaser(conn *pgxpool.Conn, key int64) func() {
	return func() {
		ctx := context.Background()
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", key); err != nil {
			// A session that cannot unlock must not go back to the pool holding the lock.
			conn.Conn().Close(ctx)
		}
		conn.Release()
	}
}

// TrySessionLock takes a session advisory lock on a connection of its own when no
// other session holds it, and returns the function that releases it; ok is false,
// with nothing held, when another session holds it.
func TrySessionLock(ctx context.Context, pool *pgxpool.Pool, key int64) (unlock func(), ok bool, err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("acquire a connection for advisory lock %x: %w", key, err)
	}
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok); err != nil || !ok {
		conn.Release()
		if err != nil {
			return nil, false, fmt.Errorf("try advisory lock %x: %w", key, err)
		}
		return nil, false, nil
	}
	return releaser(conn, key), true, nil
}
