package pg

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Listener holds one connection LISTENing on a channel and wakes every waiter on each
// notification, when its connection is lost and when its LISTEN takes hold.
// Notifications are a latency optimisation only: waiters also poll, so a lost
// connection or a dropped NOTIFY delays them by at most their poll interval.
type Listener struct {
	pool    *pgxpool.Pool
	channel string
	log     *slog.Logger

	mu   sync.Mutex
	wake chan struct{}
	// holding is true from the moment a LISTEN takes hold until its connection is
	// found lost: while it is false, a notification may reach no one here.
	holding atomic.Bool
	// beforeListen, set by a test only, runs before each LISTEN; an error counts as a
	// lost connection.
	beforeListen func(context.Context) error
}

// NewListener returns a listener on channel; Run must be running for it to wake anyone.
func NewListener(pool *pgxpool.Pool, channel string, log *slog.Logger) *Listener {
	return &Listener{pool: pool, channel: channel, log: log, wake: make(chan struct{})}
}

// C returns a channel closed at the next notification.
func (l *Listener) C() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wake
}

// Holding reports whether the LISTEN holds: every notification from now until it
// answers false again reaches this listener.
func (l *Listener) Holding() bool { return l.holding.Load() }

// HoldOffListens makes every LISTEN fail with the error f answers (nil lets it
// through): a test keeps a listener from taking hold with it.
func (l *Listener) HoldOffListens(f func(context.Context) error) { l.beforeListen = f }

// Wake wakes every waiter as a notification would: a waker in the same process
// needs no round trip through Postgres.
func (l *Listener) Wake() { l.broadcast() }

func (l *Listener) broadcast() {
	l.mu.Lock()
	close(l.wake)
	l.wake = make(chan struct{})
	l.mu.Unlock()
}

// Run listens until ctx ends, reconnecting after a lost connection.
func (l *Listener) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := l.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		l.log.Warn("LISTEN connection lost; waiters fall back to polling", "channel", l.channel, "err", err)
		// Whatever was notified while the connection was down is found by the waiters' next check.
		l.broadcast()
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff < 5*time.Second {
			backoff *= 2
		}
	}
}

func (l *Listener) listen(ctx context.Context) error {
	defer l.holding.Store(false)
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The session is left in LISTEN state: it never goes back to the pool.
	defer func() {
		conn.Conn().Close(context.Background())
		conn.Release()
	}()
	if l.beforeListen != nil {
		if err := l.beforeListen(ctx); err != nil {
			return err
		}
	}
	if _, err := conn.Exec(ctx, "LISTEN "+l.channel); err != nil {
		return err
	}
	l.holding.Store(true)
	// What was notified before the LISTEN took hold (at start, or while the connection
	// was down) reached no one: the waiters check again now.
	l.broadcast()
	for {
		if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
			return err
		}
		l.broadcast()
	}
}
