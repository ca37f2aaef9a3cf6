package outbox

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Waker wakes the relay after commits that queued records, outside their
// transactions. A NOTIFY inside a commit makes the commit itself slower (Postgres
// serialises notifying commits and signals every listener while the committing
// session waits), and memory.set's commits hold the namespace's generation lock until
// they end. So commits only poke the waker; it wakes the relays of this process at
// once and, unless one of them holds the relay lock (it is the relay that publishes),
// sends one NOTIFY for every burst of pokes, which wakes a relay that runs elsewhere. A
// poke lost to a crash, or to a lock that moved to another process meanwhile, delays
// the relay by its poll, no more: the wake-up is a latency optimisation only, as the
// Listener's is.
type Waker struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	poke chan struct{}

	mu    sync.Mutex
	local map[int]func() bool
	next  int
}

// NewWaker returns a waker that notifies through pool; Run must be running for it to
// send anything.
func NewWaker(pool *pgxpool.Pool, log *slog.Logger) *Waker {
	return &Waker{pool: pool, log: log, poke: make(chan struct{}, 1), local: map[int]func() bool{}}
}

// WakeLocal adds a relay of this process to wake on every poke, until the returned
// function removes it. wake reports whether that relay holds the relay lock.
func (w *Waker) WakeLocal(wake func() (holding bool)) (remove func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	id := w.next
	w.next++
	w.local[id] = wake
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.local, id)
	}
}

// Queued says that a commit queued records. It never blocks: pokes that arrive while
// a NOTIFY is on its way are folded into the next one.
func (w *Waker) Queued() {
	if w == nil {
		return
	}
	w.mu.Lock()
	holding := false
	for _, wake := range w.local {
		if wake() {
			holding = true
		}
	}
	w.mu.Unlock()
	if holding {
		return
	}
	select {
	case w.poke <- struct{}{}:
	default:
	}
}

// Run sends the NOTIFYs until ctx ends.
func (w *Waker) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.poke:
		}
		nctx, cancel := context.WithTimeout(ctx, time.Second)
		if _, err := w.pool.Exec(nctx, `SELECT pg_notify('`+Channel+`', '')`); err != nil && ctx.Err() == nil {
			w.log.Debug("waking the relay failed; it finds the records at its next poll", "err", err)
		}
		cancel()
	}
}
