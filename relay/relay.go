// Package relay publishes the outbox to Kafka. One relay is active per deployment (a
// Postgres advisory lock; others stand by). It keeps no cursor: each round reads the
// oldest committed rows left, produces them with an idempotent producer and acks=all,
// and deletes what Kafka acknowledged. A crash between produce and delete publishes a
// record again; consumers dedupe by seq.
//
// A record Kafka refuses (too large, invalid) is retried alone with backoff and, after
// MaxAttempts refusals, parked: a loom.parked placeholder takes its seq on the topic,
// so the namespace stays gapless, and the row stays in the outbox for an operator.
// Kafka being away is not a refusal: nothing is counted and everything waits.
//
// With synchronous durability only what the synchronous standbys hold is published:
// a round's batch waits until they flushed it (durable.go).
package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/kafka"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/metrics"
	"github.com/loomplane/loom/internal/outbox"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/revisions"
	"github.com/loomplane/loom/internal/shutdown"
	"github.com/loomplane/loom/internal/tracing"
)

// standbyRetry is how often a standby relay tries for the relay lock.
const standbyRetry = 2 * time.Second

// Faults lets a test stop the relay at a chosen point; nil fields do nothing.
type Faults struct {
	// AfterProduce runs once Kafka acked a round and before its rows are deleted.
	// An error ends Run as a crash there would: published, not deleted.
	AfterProduce func(ids []int64) error
}

// Relay moves outbox rows to Kafka.
type Relay struct {
	cfg      config.Relay
	pipe     config.Pipeline
	pool     *pgxpool.Pool
	producer *kgo.Client
	wake     *pg.Listener
	log      *slog.Logger
	faults   Faults

	published *metrics.Counter
	failed    *metrics.Counter
	parked    *metrics.Counter
	active    *metrics.Gauge
	heldRows  *metrics.GaugeVec

	hold holdState
	// holding is set while this relay holds the relay lock: this process's commits need
	// not NOTIFY another process's relay (outbox.Waker).
	holding atomic.Bool

	// retryAt holds a namespace back until its refused head's backoff has passed.
	// Only Run's goroutine touches it; a restart forgets it and retries at once.
	retryAt map[string]time.Time

	// tracer traces the produce of each record a traced write queued.
	tracer trace.Tracer

	// keys open the data keys of the revisions whose records it seals (SetKeys).
	keys *kek.Ring
	// handoff receives the data keys it seals revisions with, for this process's index
	// follower (SetHandoff; nil: none).
	handoff *revisions.Handoff
}

// New returns a relay; producer must be an idempotent kgo client (the kgo default)
// with acks=all. Its placeholders carry pipe's event source, and a round under way
// when Run's ctx ends may finish within pipe's shutdown grace.
func New(cfg config.Relay, pipe config.Pipeline, pool *pgxpool.Pool, producer *kgo.Client, wake *pg.Listener,
	reg *metrics.Registry, log *slog.Logger, faults Faults) *Relay {
	r := &Relay{cfg: cfg, pipe: pipe, pool: pool, producer: producer, wake: wake, log: log, faults: faults,
		published: reg.Counter("loom_relay_published_total", "Outbox records Kafka acknowledged.").With(),
		failed:    reg.Counter("loom_relay_produce_failures_total", "Outbox records Kafka refused or did not acknowledge.").With(),
		parked:    reg.Counter("loom_relay_parked_total", "Outbox records parked after Kafka refused them; a loom.parked placeholder took their seq.").With(),
		active:    reg.Gauge("loom_relay_active", "1 while this process holds the relay lock.").With(),
		heldRows: reg.Gauge("loom_relay_held_rows",
			"Outbox rows read but held back from the topic until the synchronous standbys flush them, by reason.", "reason"),
		retryAt: map[string]time.Time{}, tracer: tracing.Tracer(nil),
	}
	r.resetHold()
	return r
}

// SetTracer traces each produce of a record that carries a trace context with t, in
// that record's trace (nil: not traced). Call it before Run.
func (r *Relay) SetTracer(t trace.Tracer) { r.tracer = tracing.Tracer(t) }

// SetKeys opens the stored data keys of the revisions whose records were queued by
// reference (outbox.Complete) with r. Without it only raw keys open. Call it before Run.
func (r *Relay) SetKeys(ring *kek.Ring) { r.keys = ring }

// SetHandoff hands the data keys of the revisions whose records it seals over to h,
// which this process's index follower takes them from instead of reading them back
// from Postgres. Call it before Run.
func (r *Relay) SetHandoff(h *revisions.Handoff) { r.handoff = h }

// unwrap opens a stored data key.
func (r *Relay) unwrap(stored []byte) ([]byte, error) {
	if r.keys == nil {
		if kek.Raw(stored) {
			return stored, nil
		}
		return nil, kek.ErrNotOpened
	}
	return r.keys.Unwrap(stored)
}

// ProducerOpts are the kgo options a relay's producer needs; maxRecordBytes is the
// largest record it produces (LOOM_TOPIC_MAX_RECORD_BYTES).
func ProducerOpts(maxRecordBytes int) []kgo.Opt {
	return []kgo.Opt{
		// kgo fails a record past its batch limit before sending it: the limit follows
		// the largest record Loom makes, a knowledge document's.
		kgo.ProducerBatchMaxBytes(int32(maxRecordBytes + kafka.BatchOverheadBytes)),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		// Bounded, so a Kafka outage ends a round and the relay backs off, instead of
		// one round waiting for ever; kgo fails a partition's later records with it,
		// so nothing is produced out of order.
		kgo.RecordDeliveryTimeout(30 * time.Second),
	}
}

// Run takes the relay lock (standing by while another process holds it) and
// publishes until ctx ends or a fault stops it.
func (r *Relay) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		held, release, err := r.tryLock(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("relay: cannot try the relay lock", "err", err)
		}
		if !held {
			select {
			case <-ctx.Done():
			case <-time.After(standbyRetry):
			}
			continue
		}
		r.active.Set(1)
		r.holding.Store(true)
		err = r.publishWhileHeld(ctx, release)
		r.holding.Store(false)
		r.active.Set(0)
		r.resetHold() // what is held is the next holder's to read again
		release.unlock()
		var stop *faultStop
		if errors.As(err, &stop) {
			return err
		}
		if err != nil && ctx.Err() == nil {
			r.log.Warn("relay: lost the lock or Postgres; standing by", "err", err)
		}
	}
	return nil
}

// Holding reports whether this relay holds the relay lock: it is the one publishing.
func (r *Relay) Holding() bool { return r.holding.Load() }

type faultStop struct{ err error }

func (f *faultStop) Error() string { return "relay stopped by injected fault: " + f.err.Error() }

type lockHandle struct {
	conn   *pgxpool.Conn
	unlock func()
	alive  func(context.Context) error
}

// tryLock takes the relay's session advisory lock without waiting. The lock lives as
// long as its connection: a relay that dies releases it, and a standby takes over.
func (r *Relay) tryLock(ctx context.Context) (bool, *lockHandle, error) {
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return false, nil, err
	}
	// A session that took the lock commits asynchronously from then on: its only writes
	// are the rounds' deletes (outbox.QueueDelete), and it is closed with the lock.
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT ok, CASE WHEN ok THEN "+outbox.SessionCommitsAsync+" END FROM pg_try_advisory_lock($1) AS ok",
		pg.LockRelay).Scan(&ok, nil); err != nil {
		conn.Release()
		return false, nil, err
	}
	if !ok {
		conn.Release()
		return false, nil, nil
	}
	h := &lockHandle{conn: conn}
	h.unlock = func() {
		// Closing the session releases the lock even if the unlock cannot be sent.
		conn.Conn().Close(context.Background())
		conn.Release()
	}
	h.alive = func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return conn.Ping(ctx)
	}
	return true, h, nil
}

func (r *Relay) publishWhileHeld(ctx context.Context, h *lockHandle) error {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 200 * time.Millisecond
	bo.MaxInterval = 10 * time.Second
	bo.MaxElapsedTime = 0
	// The lock is only as good as the session holding it. A round runs on that session,
	// so a round that succeeded proved it alive: it is pinged only before the first
	// round and after a failed one, not on every round's path from commit to topic.
	check := true
	for ctx.Err() == nil {
		if check {
			if err := h.alive(ctx); err != nil {
				return fmt.Errorf("relay lock session: %w", err)
			}
		}
		// Rounds under way when the relay is stopped finish: what Kafka acknowledged is
		// deleted from the outbox, so the next relay does not publish it again.
		rctx, roundDone := shutdown.Outlive(ctx, r.pipe.ShutdownGrace)
		wake, err := r.rounds(rctx, ctx, h.conn)
		roundDone()
		var stop *faultStop
		if errors.As(err, &stop) {
			return err
		}
		var held *errHeld
		if errors.As(err, &held) {
			err = nil // not a failure: the standbys are behind or away; read again after the poll
		}
		check = err != nil
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			wait := bo.NextBackOff()
			r.log.Warn("relay: round failed; backing off", "err", err, "retry_in", wait)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
			continue
		}
		bo.Reset()
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-time.After(r.cfg.Poll):
		}
	}
	return nil
}
