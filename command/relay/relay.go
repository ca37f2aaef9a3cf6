// Package relay publishes the outbox to Kafka. One relay is active per deployment (a
// Postgres advisory lock; others stand by). It keeps no cursor: each round reads the
// oldest committed rows left, produces them with an idempotent producer and acks=all,
// and deletes what Kafka acknowledged. A crash between produce and delete publishes a
// record again; consumers dedupe by seq.
package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/internal/metrics"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/shutdown"
)

// Config tunes the relay.
type Config struct {
	BatchRows int           // rows per round
	Poll      time.Duration // fallback wake-up when no NOTIFY arrives
	Standby   time.Duration // how often a standby tries for the lock
	Grace     time.Duration // how long a round under way may finish after Run's ctx ends
}

// Faults lets a test stop the relay at a chosen point; nil fields do nothing.
type Faults struct {
	// AfterProduce runs once Kafka acked a round and before its rows are deleted.
	// An error ends Run as a crash there would: published, not deleted.
	AfterProduce func(ids []int64) error
}

// Relay moves outbox rows to Kafka.
type Relay struct {
	cfg      Config
	pool     *pgxpool.Pool
	producer *kgo.Client
	wake     *pg.Listener
	log      *slog.Logger
	faults   Faults

	published *metrics.Counter
	failed    *metrics.Counter
	active    *metrics.Gauge
}

// New returns a relay; producer must be an idempotent kgo client (the kgo default)
// with acks=all.
func New(cfg Config, pool *pgxpool.Pool, producer *kgo.Client, wake *pg.Listener, reg *metrics.Registry, log *slog.Logger, faults Faults) *Relay {
	if cfg.BatchRows <= 0 {
		cfg.BatchRows = 500
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Standby <= 0 {
		cfg.Standby = 2 * time.Second
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 10 * time.Second
	}
	return &Relay{cfg: cfg, pool: pool, producer: producer, wake: wake, log: log, faults: faults,
		published: reg.Counter("loom_relay_published_total", "Outbox records Kafka acknowledged.").With(),
		failed:    reg.Counter("loom_relay_produce_failures_total", "Outbox records Kafka refused or did not acknowledge.").With(),
		active:    reg.Gauge("loom_relay_active", "1 while this process holds the relay lock.").With(),
	}
}

// ProducerOpts are the kgo options a relay's producer needs.
func ProducerOpts() []kgo.Opt {
	return []kgo.Opt{
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
			case <-time.After(r.cfg.Standby):
			}
			continue
		}
		r.active.Set(1)
		err = r.publishWhileHeld(ctx, release.alive)
		r.active.Set(0)
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
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", pg.LockRelay).Scan(&ok); err != nil {
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

func (r *Relay) publishWhileHeld(ctx context.Context, alive func(context.Context) error) error {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 200 * time.Millisecond
	bo.MaxInterval = 10 * time.Second
	bo.MaxElapsedTime = 0
	for ctx.Err() == nil {
		// The lock is only as good as the session holding it.
		if err := alive(ctx); err != nil {
			return fmt.Errorf("relay lock session: %w", err)
		}
		wake := r.wake.C()
		// A round under way when the relay is stopped finishes: what Kafka acknowledged
		// is deleted from the outbox, so the next relay does not publish it again.
		rctx, roundDone := shutdown.Outlive(ctx, r.cfg.Grace)
		n, err := r.round(rctx)
		roundDone()
		var stop *faultStop
		if errors.As(err, &stop) {
			return err
		}
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
		if n == r.cfg.BatchRows {
			continue // more rows are waiting
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-time.After(r.cfg.Poll):
		}
	}
	return nil
}

type outboxRow struct {
	id        int64
	org       string
	namespace string
	seq       int64
	topic     string
	key       []byte
	headers   []byte
	value     []byte
}

// round publishes the oldest rows and deletes those Kafka acknowledged. Within a
// namespace only the acknowledged prefix is deleted: a later record acknowledged after
// an earlier one failed is published again after it, so a consumer never sees a
// namespace's seqs skip forward for good.
func (r *Relay) round(ctx context.Context) (int, error) {
	rows, err := r.read(ctx)
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	records := make([]*kgo.Record, len(rows))
	for i, row := range rows {
		rec, err := toRecord(row)
		if err != nil {
			return 0, err
		}
		records[i] = rec
	}
	start := time.Now()
	results := r.producer.ProduceSync(ctx, records...)
	r.log.Debug("relay: round produced", "records", len(records), "took_ms", time.Since(start).Milliseconds())
	failedNS := map[string]bool{}
	var done []int64
	var firstErr error
	for i, res := range results {
		ns := rows[i].org + "/" + rows[i].namespace
		if res.Err != nil {
			r.failed.Inc()
			failedNS[ns] = true
			if firstErr == nil {
				firstErr = fmt.Errorf("produce %s seq %d: %w", ns, rows[i].seq, res.Err)
			}
			continue
		}
		if !failedNS[ns] {
			done = append(done, rows[i].id)
		}
	}
	if r.faults.AfterProduce != nil {
		if err := r.faults.AfterProduce(done); err != nil {
			return 0, &faultStop{err}
		}
	}
	if len(done) > 0 {
		// The delete outlives a cancelled ctx: what Kafka acknowledged should not be sent again.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_, err := r.pool.Exec(dctx, "DELETE FROM loom.outbox WHERE id = ANY($1)", done)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("delete published outbox rows: %w", err)
		}
		r.published.Add(float64(len(done)))
	}
	if firstErr != nil {
		r.recordFailure(ctx, rows, results, firstErr)
		return 0, firstErr
	}
	return len(rows), nil
}

func (r *Relay) recordFailure(ctx context.Context, rows []outboxRow, results kgo.ProduceResults, err error) {
	var ids []int64
	for i, res := range results {
		if res.Err != nil {
			ids = append(ids, rows[i].id)
		}
	}
	if _, uerr := r.pool.Exec(ctx, "UPDATE loom.outbox SET attempts = attempts + 1, last_error = $2 WHERE id = ANY($1)", ids, err.Error()); uerr != nil {
		r.log.Warn("relay: cannot record a failed produce", "err", uerr)
	}
}

func (r *Relay) read(ctx context.Context) ([]outboxRow, error) {
	qrows, err := r.pool.Query(ctx, `SELECT id, org, namespace, seq, topic, record_key, headers, value
		FROM loom.outbox WHERE parked_at IS NULL ORDER BY id LIMIT $1`, r.cfg.BatchRows)
	if err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	defer qrows.Close()
	var rows []outboxRow
	for qrows.Next() {
		var o outboxRow
		if err := qrows.Scan(&o.id, &o.org, &o.namespace, &o.seq, &o.topic, &o.key, &o.headers, &o.value); err != nil {
			return nil, fmt.Errorf("read outbox: %w", err)
		}
		rows = append(rows, o)
	}
	return rows, qrows.Err()
}

func toRecord(o outboxRow) (*kgo.Record, error) {
	var pairs [][2]string
	if err := json.Unmarshal(o.headers, &pairs); err != nil {
		return nil, fmt.Errorf("outbox row %d headers: %w", o.id, err)
	}
	rec := &kgo.Record{Topic: o.topic, Key: o.key, Value: o.value}
	for _, p := range pairs {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: p[0], Value: []byte(p[1])})
	}
	return rec, nil
}
