package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Advisory lock keys. Each names one deployment-wide role or critical section.
const (
	LockPGMigrations int64 = 0x4c4f4f4d_0001 // "LOOM" 1
	LockCHMigrations int64 = 0x4c4f4f4d_0002
	LockRelay        int64 = 0x4c4f4f4d_0003
	LockAuthority    int64 = 0x4c4f4f4d_0004 // recording the deployment at first boot
)

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
	return func() {
		ctx := context.Background()
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", key); err != nil {
			// A session that cannot unlock must not go back to the pool holding the lock.
			conn.Conn().Close(ctx)
		}
		conn.Release()
	}, nil
}
