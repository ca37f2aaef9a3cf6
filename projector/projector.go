// Package projector consumes the revisions topic and builds the ClickHouse read
// models. A batch is written with one insert per table, then its watermarks are
// upserted in Postgres (and notified), then its offsets are committed: a crash
// anywhere redelivers the batch, and every table collapses what it sees twice.
package projector

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/kafka"
	"github.com/loomplane/loom/internal/metrics"
	"github.com/loomplane/loom/internal/shutdown"
	"github.com/loomplane/loom/internal/tableset"
	"github.com/loomplane/loom/internal/text"
	"github.com/loomplane/loom/internal/tracing"
)

// settings is what one projector runs with: the projector's section, the projection
// it builds (its name and the set of tables it writes) and what the pipeline shares.
type settings struct {
	config.Projector
	Name   string // the projection; its group is loom-projection-<name>
	Topic  string
	Tables tableset.Set
	// Grace is how long a batch under way may finish, offsets committed, after Run's ctx ends.
	Grace time.Duration
	// FillWait is how long a batch that finds the projection behind keeps polling
	// for more records, up to BatchRows, before it starts: the interval, within
	// [100 ms, 1 s].
	FillWait time.Duration
}

// Faults lets a test break the projection at a chosen point; nil fields do nothing.
type Faults struct {
	// BeforeInsert runs before a batch's inserts for each namespace with rows in
	// them; an error fails the inserts, as ClickHouse refusing the rows would.
	BeforeInsert func(org, namespace string) error
}

// stemMemo is how many words a projector's stem memo holds before it starts again.
const stemMemo = 1 << 16

// Group is the consumer group of a projection.
func Group(name string) string { return "loom-projection-" + name }

// ConsumerOpts are the kgo options a projector's consumer needs. Offsets are committed
// only after ClickHouse and the watermarks hold the batch, and a rebalance waits for
// the batch in hand, so no offset ever passes an unwritten record.
func consumerOpts(cfg settings) []kgo.Opt {
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
	cfg    settings
	pool   *pgxpool.Pool
	ch     *ch.Conn
	log    *slog.Logger
	faults Faults

	applied   *metrics.Counter
	dupes     *metrics.Counter
	undecoded *metrics.Counter
	gaps      *metrics.Counter
	sealed    *metrics.Counter
	uncarried *metrics.Counter
	graphRows *metrics.Counter
	failed    *metrics.Counter
	held      *metrics.Counter
	repaired  *metrics.Counter
	batchTime *metrics.Histogram
	batchRecs *metrics.Histogram
	lag       *metrics.GaugeVec

	// unchained, when set and true, writes a batch's audit rows without linking them
	// (empty hashes, as rows from before the chain): `loomd bench chain` measures the
	// chain's cost with it, nothing else sets it.
	unchained func() bool
	// wanted, when set, is the channel that closes when a read waits for the projection.
	wanted func() <-chan struct{}
	// stems memoises the lexical rows' stemming: a replay stems the same words over and over.
	stems *text.Stems
	// heads are the audit chains' last hashes this projector chained (chain_heads.go).
	heads chainHeads
	// kept are the search documents this projector wrote, which copies carry their
	// vectors from (carry_kept.go).
	kept keptDocs

	// tracer traces the processing of each record a traced write queued, produced
	// since runStart (when Run last started).
	tracer   trace.Tracer
	runStart time.Time
}

// New returns a projector of pipe's projection writing tables (the serving set, or a
// rebuild's); it registers its metrics in reg, so make one per process and
// projection, and Run it as often as its consumer is replaced.
func New(section config.Projector, pipe config.Pipeline, tables tableset.Set, pool *pgxpool.Pool, conn *ch.Conn,
	reg *metrics.Registry, log *slog.Logger, faults Faults) *Projector {
	cfg := settings{Projector: section, Name: pipe.Projection, Topic: pipe.Topic, Tables: tables, Grace: pipe.ShutdownGrace,
		FillWait: fillWaitFor(section.Interval)}
	l := cfg.Name
	return &Projector{cfg: cfg, pool: pool, ch: conn, log: log.With("projection", cfg.Name), faults: faults, tracer: tracing.Tracer(nil),
		stems:     text.NewStems(stemMemo),
		applied:   reg.Counter("loom_projector_records_total", "Records a projection applied.", "projection").With(l),
		dupes:     reg.Counter("loom_projector_duplicates_total", "Records at or below the watermark (redelivered).", "projection").With(l),
		undecoded: reg.Counter("loom_projector_undecodable_total", "Records that are not a valid envelope, skipped.", "projection").With(l),
		gaps:      reg.Counter("loom_projector_seq_gaps_total", "Batches in which a namespace's seqs skipped forward.", "projection").With(l),
		sealed:    reg.Counter("loom_projector_unopenable_total", "Revisions whose data key is gone (redacted or erased): no content projected.", "projection").With(l),
		uncarried: reg.Counter("loom_projector_uncarried_total", "Copies whose content's vector ClickHouse no longer holds: projected without a search vector.", "projection").With(l),
		graphRows: reg.Counter("loom_projector_graph_rows_total", "Graph row versions (facts, edges, entities, row links) a projection wrote.", "projection").With(l),
		failed: reg.Counter("loom_projector_failed_records_total",
			"Records a projection could not apply, recorded as failures for the repair pass (each time it failed).", "projection").With(l),
		held: reg.Counter("loom_projector_held_records_total",
			"Records recorded behind an earlier failure of their namespace instead of being applied past it.", "projection").With(l),
		repaired:  reg.Counter("loom_projector_repaired_records_total", "Recorded failures the repair pass applied.", "projection").With(l),
		batchTime: reg.Histogram("loom_projector_batch_seconds", "Time to write one batch to ClickHouse and Postgres.", nil, "projection").With(l),
		batchRecs: reg.Histogram("loom_projector_batch_records", "Records in one batch.",
			[]float64{1, 10, 100, 500, 1000, 2500, 5000, 10000}, "projection").With(l),
		lag: reg.Gauge("loom_projector_lag_records", "Records on the partition past the last one this projection applied, as of its last fetch.", "projection", "partition"),
	}
}

// SetAuditChainOff makes the projector write audit rows unlinked while off reports
// true: a measuring switch for `loomd bench chain`, never a deployment's setting (a
// verification of the rows it wrote fails at the first of them).
func (p *Projector) SetAuditChainOff(off func() bool) { p.unchained = off }

// SetWanted makes the projector write its next batch at once when wanted's channel
// closes: a barrier waits for the projection (watermarks.WantedChannel). Call it
// before Run; without it the pace alone decides.
func (p *Projector) SetWanted(wanted func() <-chan struct{}) { p.wanted = wanted }

func (p *Projector) wantedNow() <-chan struct{} {
	if p.wanted == nil {
		return nil
	}
	return p.wanted()
}

// SetTracer traces the processing of each record that carries a trace context with t,
// in that record's trace (nil: not traced). Call it before Run.
func (p *Projector) SetTracer(t trace.Tracer) { p.tracer = tracing.Tracer(t) }

// Run consumes with consumer, built with consumerOpts(cfg), until ctx ends. A batch
// that cannot be written is retried with backoff and its offsets are not committed
// meanwhile; one that keeps failing for some namespaces' records is split, and
// those records are recorded as failures (applyWithRetry).
func (p *Projector) Run(ctx context.Context, consumer *kgo.Client) error {
	p.runStart = time.Now()
	pace := newPacer(p.cfg.Interval, p.cfg.BusyInterval, time.Now())
	wanted := p.wantedNow()
	var seen map[int32]int64 // the lags the last batch saw (fill.go)
	var next *ahead          // the batch polled while the last one was applied (ahead.go)
	defer func() {
		if next != nil {
			next.wait()
			consumer.AllowRebalance()
		}
	}()
	for {
		// Records that arrive while the pace holds a batch back wait in the client and
		// go out together: a busy projection makes few, large parts. A read waiting for
		// the projection ends a stretched pace.
		held := false
		for wait := pace.delay(time.Now()); wait > 0; wait = pace.delay(time.Now()) {
			held = true
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			case <-wanted:
				pace.hurry(time.Now())
				wanted = p.wantedNow()
			}
		}
		// Taken before the poll: a want that comes while this batch is written ends
		// the next one's wait.
		wanted = p.wantedNow()
		polled, waited, wasAhead := p.nextBatch(ctx, consumer, seen, next)
		next = nil
		seen = polled.lag
		if ctx.Err() != nil {
			consumer.AllowRebalance()
			return nil
		}
		recs := polled.recs
		if len(recs) == 0 {
			consumer.AllowRebalance()
			continue
		}
		start := time.Now()
		pace.take(start)
		pace.batched(start, held, waited, len(recs) >= p.cfg.BatchRows)
		if !wasAhead && p.cfg.farBehind(polled) {
			next = p.pollAhead(ctx, consumer, polled.lag)
		}
		// A batch under way when the projector is stopped is written and its offsets
		// committed, so the next projector starts after it instead of redoing it.
		bctx, batchDone := shutdown.Outlive(ctx, p.cfg.Grace)
		err := p.applyWithRetry(bctx, recs)
		if err == nil {
			p.log.Debug("projector: batch applied", "records", len(recs), "bytes", polled.bytes, "polled_ahead", wasAhead,
				"oldest_record_age_ms", start.Sub(recs[0].Timestamp).Milliseconds(), "took_ms", time.Since(start).Milliseconds())
			p.batchRecs.Observe(float64(len(recs)))
			p.recordLag(polled.lag)
			if cerr := consumer.CommitRecords(bctx, recs...); cerr != nil {
				// Uncommitted offsets mean redelivery, which the tables collapse.
				p.log.Warn("projector: offset commit failed; the batch will be redelivered", "err", cerr)
			}
		}
		batchDone()
		if next == nil {
			consumer.AllowRebalance()
		}
		if err != nil {
			return nil // the grace ran out; the batch is redelivered to whoever runs next
		}
	}
}

// nextBatch is the batch polled ahead, when there is one, else a batch polled now;
// waited is how long its poll took, and wasAhead whether it was polled ahead.
func (p *Projector) nextBatch(ctx context.Context, consumer *kgo.Client, seen map[int32]int64, next *ahead) (b polled, waited time.Duration, wasAhead bool) {
	if next != nil {
		return next.wait(), next.took, true
	}
	polledAt := time.Now()
	b = p.pollBatch(ctx, consumer, seen)
	return b, time.Since(polledAt), false
}

// recordLag sets each fetched partition's lag: its high watermark at the latest fetch
// past the last record of the batch.
func (p *Projector) recordLag(lag map[int32]int64) {
	for part, n := range lag {
		p.lag.With(p.cfg.Name, strconv.Itoa(int(part))).Set(float64(n))
	}
}

// RunMember runs the projection as a fresh member of its group until ctx ends.
func (p *Projector) RunMember(ctx context.Context, brokers []string) error {
	return kafka.RunMember(brokers, consumerOpts(p.cfg), func(consumer *kgo.Client) error { return p.Run(ctx, consumer) })
}
