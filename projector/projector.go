// Package projector consumes the revisions topic and builds the ClickHouse read
// models. A batch is written with one insert per table, then its watermarks are
// upserted in Postgres (and notified), then its offsets are committed: a crash
// anywhere redelivers the batch, and every table collapses what it sees twice.
package projector

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/erasure"
	"github.com/loomplane/loom/internal/metrics"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/shutdown"
)

// Config tunes a projection.
type Config struct {
	Name      string        // the projection; its group is loom-projection-<name>
	Topic     string        //
	BatchRows int           // records per batch at most
	Interval  time.Duration // at most one batch starts per interval (parts budget)
	// SessionTimeout is the consumer-group session: a projector that dies without
	// leaving the group loses its partitions to the others after it.
	SessionTimeout time.Duration
	// Grace is how long a batch under way may finish, offsets committed, after Run's ctx ends.
	Grace time.Duration
}

// Group is the consumer group of a projection.
func Group(name string) string { return "loom-projection-" + name }

// ConsumerOpts are the kgo options a projector's consumer needs. Offsets are committed
// only after ClickHouse and the watermarks hold the batch, and a rebalance waits for
// the batch in hand, so no offset ever passes an unwritten record.
func ConsumerOpts(cfg Config) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.ConsumerGroup(Group(cfg.Name)),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}
	if cfg.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(cfg.SessionTimeout), kgo.HeartbeatInterval(min(3*time.Second, cfg.SessionTimeout/3)))
	}
	return opts
}

// Projector runs one projection.
type Projector struct {
	cfg  Config
	pool *pgxpool.Pool
	ch   *ch.Conn
	log  *slog.Logger

	applied   *metrics.Counter
	dupes     *metrics.Counter
	undecoded *metrics.Counter
	gaps      *metrics.Counter
	sealed    *metrics.Counter
	uncarried *metrics.Counter
	graphRows *metrics.Counter
	batchTime *metrics.Histogram
	lag       *metrics.GaugeVec
}

// New returns a projector; it registers its metrics in reg, so make one per process
// and projection, and Run it as often as its consumer is replaced.
func New(cfg Config, pool *pgxpool.Pool, conn *ch.Conn, reg *metrics.Registry, log *slog.Logger) *Projector {
	if cfg.BatchRows <= 0 {
		cfg.BatchRows = 5000
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 10 * time.Second
	}
	l := cfg.Name
	return &Projector{cfg: cfg, pool: pool, ch: conn, log: log.With("projection", cfg.Name),
		applied:   reg.Counter("loom_projector_records_total", "Records a projection applied.", "projection").With(l),
		dupes:     reg.Counter("loom_projector_duplicates_total", "Records at or below the watermark (redelivered).", "projection").With(l),
		undecoded: reg.Counter("loom_projector_undecodable_total", "Records that are not a valid envelope, skipped.", "projection").With(l),
		gaps:      reg.Counter("loom_projector_seq_gaps_total", "Batches in which a namespace's seqs skipped forward.", "projection").With(l),
		sealed:    reg.Counter("loom_projector_unopenable_total", "Revisions whose data key is gone (redacted or erased): no content projected.", "projection").With(l),
		uncarried: reg.Counter("loom_projector_uncarried_total", "Copies whose content's vector ClickHouse no longer holds: projected without a search vector.", "projection").With(l),
		graphRows: reg.Counter("loom_projector_graph_rows_total", "Graph row versions (facts, edges, entities, row links) a projection wrote.", "projection").With(l),
		batchTime: reg.Histogram("loom_projector_batch_seconds", "Time to write one batch to ClickHouse and Postgres.", nil, "projection").With(l),
		lag:       reg.Gauge("loom_projector_lag_records", "Records on the partition past the last one this projection applied, as of its last fetch.", "projection", "partition"),
	}
}

// Run consumes with consumer, built with ConsumerOpts(cfg), until ctx ends. A batch
// that cannot be written is retried with backoff and its offsets are not committed
// meanwhile.
func (p *Projector) Run(ctx context.Context, consumer *kgo.Client) error {
	pace := newPacer(p.cfg.Interval, time.Now())
	for {
		// Records that arrive while the pace holds a batch back wait in the client and
		// go out together: a busy projection makes few, large parts.
		if wait := pace.delay(time.Now()); wait > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
		fetches := consumer.PollRecords(ctx, p.cfg.BatchRows)
		if ctx.Err() != nil {
			consumer.AllowRebalance()
			return nil
		}
		fetches.EachError(func(topic string, part int32, err error) {
			p.log.Warn("projector: fetch error", "topic", topic, "partition", part, "err", err)
		})
		recs := fetches.Records()
		if len(recs) == 0 {
			consumer.AllowRebalance()
			continue
		}
		start := time.Now()
		pace.take(start)
		// A batch under way when the projector is stopped is written and its offsets
		// committed, so the next projector starts after it instead of redoing it.
		bctx, batchDone := shutdown.Outlive(ctx, p.cfg.Grace)
		err := p.applyWithRetry(bctx, recs)
		if err == nil {
			p.log.Debug("projector: batch applied", "records", len(recs),
				"oldest_record_age_ms", start.Sub(recs[0].Timestamp).Milliseconds(), "took_ms", time.Since(start).Milliseconds())
			p.recordLag(fetches)
			if cerr := consumer.CommitRecords(bctx, recs...); cerr != nil {
				// Uncommitted offsets mean redelivery, which the tables collapse.
				p.log.Warn("projector: offset commit failed; the batch will be redelivered", "err", cerr)
			}
		}
		batchDone()
		consumer.AllowRebalance()
		if err != nil {
			return nil // the grace ran out; the batch is redelivered to whoever runs next
		}
	}
}

func (p *Projector) applyWithRetry(ctx context.Context, recs []*kgo.Record) error {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 200 * time.Millisecond
	bo.MaxInterval = 10 * time.Second
	bo.MaxElapsedTime = 0
	for {
		start := time.Now()
		err := p.apply(ctx, recs)
		if err == nil {
			p.batchTime.ObserveSince(start)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := bo.NextBackOff()
		p.log.Warn("projector: batch failed; retrying", "records", len(recs), "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// apply writes one batch: rows to ClickHouse, then the batch's redactions and
// erasures, then watermarks to Postgres.
func (p *Projector) apply(ctx context.Context, recs []*kgo.Record) error {
	b := decodeBatch(recs, p.undecoded, p.log)
	if err := p.writeBatch(ctx, b); err != nil {
		return err
	}
	if err := p.scrubAndErase(ctx, b); err != nil {
		return err
	}
	advanced, gaps, dupes, err := advanceWatermarks(ctx, p.pool, p.cfg.Name, b.seqs, b.jumps)
	if err != nil {
		return err
	}
	for _, g := range gaps {
		p.gaps.Inc()
		p.log.Warn("projector: a namespace's seqs skip forward; its watermark waits for the missing ones", "namespace", g)
	}
	p.dupes.Add(float64(dupes))
	p.applied.Add(float64(advanced))
	return nil
}

// writeBatch opens the batch's revisions and writes their rows, and the audit rows of
// its redactions. From reading the data keys until ClickHouse has the rows it holds
// the publishers lock shared: an erasure or a redaction that destroys keys after the
// read waits until these rows landed, and only then removes them (scrubAndErase).
func (p *Projector) writeBatch(ctx context.Context, b batch) error {
	if len(b.revisions) == 0 && len(b.redactions) == 0 {
		return nil
	}
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire a connection to read the batch's keys: %w", err)
	}
	defer conn.Release()
	return pg.HoldShared(ctx, conn, pg.LockPublishers, func() error {
		var rows []opened
		var graphRows []nsGraph
		if len(b.revisions) > 0 {
			keys, err := fetchKeys(ctx, conn, b.revisions)
			if err != nil {
				return err
			}
			rows = openAll(b.revisions, keys, p.sealed)
			missing, err := carryVectors(p.ch.Ctx(ctx), p.ch, rows)
			if err != nil {
				return err
			}
			p.uncarried.Add(float64(missing))
			marks, err := readWatermarks(ctx, conn, p.cfg.Name, b.namespaces(), false)
			if err != nil {
				return err
			}
			if graphRows, err = foldGraph(ctx, p.ch, b, rows, marks); err != nil {
				return err
			}
		}
		// A redaction's record seals nothing: its audit row names the memory and the
		// version, not the key.
		audits := append([]opened(nil), rows...)
		for _, env := range b.redactions {
			audits = append(audits, opened{env: env, content: &events.Content{}})
		}
		if err := writeRows(p.ch.Ctx(ctx), p.ch, rows, audits, graphRows); err != nil {
			return err
		}
		p.graphRows.Add(float64(graphRowCount(graphRows)))
		return nil
	})
}

// scrubAndErase applies the batch's redactions and erasures to ClickHouse, after
// waiting out every publisher that may still be writing what they remove (another
// projector's batch in flight over a rebalance). Both only touch rows below their
// record's seq, or the versions they name, so the batch's own later rows stay.
func (p *Projector) scrubAndErase(ctx context.Context, b batch) error {
	if len(b.fences) == 0 && len(b.redactions) == 0 {
		return nil
	}
	if err := pg.WaitOut(ctx, p.pool, pg.LockPublishers); err != nil {
		return fmt.Errorf("wait out the publishers before erasing: %w", err)
	}
	var rs []erasure.Redaction
	for _, env := range b.redactions {
		if r, ok := erasure.RedactionOf(env); ok {
			rs = append(rs, r)
		}
	}
	if err := erasure.Scrub(p.ch.Ctx(ctx), p.ch, rs); err != nil {
		return err
	}
	if len(b.fences) > 0 {
		if err := erasure.Erase(p.ch.Ctx(ctx), p.ch, b.fences); err != nil {
			return err
		}
	}
	return nil
}

// recordLag sets each fetched partition's lag: its high watermark at the fetch past
// the last record of the batch.
func (p *Projector) recordLag(fetches kgo.Fetches) {
	fetches.EachPartition(func(ftp kgo.FetchTopicPartition) {
		if len(ftp.Records) == 0 {
			return
		}
		last := ftp.Records[len(ftp.Records)-1].Offset
		p.lag.With(p.cfg.Name, strconv.Itoa(int(ftp.Partition))).Set(float64(max(ftp.HighWatermark-last-1, 0)))
	})
}
