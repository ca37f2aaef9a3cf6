package projector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/erasure"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/revisions"
	"github.com/loomplane/loom/internal/tracing"
)

// applyWithRetry applies a batch, retrying with backoff. A batch that has failed
// Attempts times on something other than an unreachable store is split by namespace
// (isolate): the namespaces whose share applies are applied, the others' records are
// recorded as failures, and the batch is done. An unreachable store is waited out,
// however long: every namespace needs it.
//
// Each record a traced write queued has a span in that write's trace, from the batch's
// first attempt until it is applied (or recorded as a failure): each record produced
// since Run started, so a replay of the topic (a reset, a new group) does not add
// spans to old traces.
func (p *Projector) applyWithRetry(ctx context.Context, recs []*kgo.Record) (err error) {
	if tracing.On(p.tracer) {
		var fresh []*kgo.Record
		for _, r := range recs {
			if !r.Timestamp.Before(p.runStart) {
				fresh = append(fresh, r)
			}
		}
		spans := tracing.StartProcess(ctx, p.tracer, "projector:"+p.cfg.Name, fresh)
		defer func() { spans.EndAll(err) }()
	}
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 200 * time.Millisecond
	bo.MaxInterval = 10 * time.Second
	bo.MaxElapsedTime = 0
	for attempt := 1; ; attempt++ {
		start := time.Now()
		err := p.apply(ctx, recs, false)
		if err == nil {
			p.batchTime.ObserveSince(start)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if attempt >= p.cfg.Attempts && !transient(err) {
			p.log.Warn("projector: batch keeps failing; splitting it by namespace", "records", len(recs), "attempts", attempt, "err", err)
			if err = p.isolate(ctx, recs, err); err == nil {
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
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

// transient reports whether err means a store could not be reached or the work was
// stopped, rather than a store refusing these records: it is retried, never recorded
// against a namespace.
func transient(err error) bool {
	return ch.Unavailable(err) || pg.Unavailable(err) || errors.Is(err, context.Canceled)
}

// apply makes one attempt at a batch. Holding the serving tables' lock when it writes
// them, it sets aside the records of namespaces held by earlier failures, writes the
// rest's rows, applies its redactions and erasures, and settles it in Postgres
// (watermarks, failures). A repair's batch holds namespaces whose failures it retries:
// they are not set aside, and the failures of the records it applies are resolved.
func (p *Projector) apply(ctx context.Context, recs []*kgo.Record, repair bool) error {
	b := decodeBatch(recs, p.undecoded, p.log)
	return p.holdingTables(ctx, func() error {
		keys := b.namespaces()
		// The serving generation cannot change under the tables' lock held here. The
		// three reads are independent: one round trip, not two in a row.
		var marks map[nsKey]int64
		var serving int
		var held map[nsKey]bool
		err := all(
			func() (err error) { marks, err = readWatermarks(ctx, p.pool, p.cfg.Name, keys, false); return err },
			func() (err error) { serving, err = p.servingGeneration(ctx, p.pool); return err },
			func() (err error) {
				if !repair {
					held, err = heldNamespaces(ctx, p.pool, p.cfg.Name, keys)
				}
				return err
			},
		)
		if err != nil {
			return err
		}
		var st settlement
		if !repair {
			var left map[nsKey][]recordRef
			b, left = b.without(held)
			for k, refs := range left {
				st.failures = append(st.failures, failuresOf(k, refs, marks[k], nil, heldBehindEarlier)...)
			}
		}
		kept := p.kept.take(b, marks, serving)
		b, failed, chained, err := p.writeBatch(ctx, b, marks, p.heads.prevs(b, marks, serving), kept)
		if err != nil {
			p.heads.forget()
			p.kept.forget()
			return err
		}
		st.failures = append(st.failures, failed...)
		if err := p.scrubAndErase(ctx, b); err != nil {
			return err
		}
		st.seqs, st.jumps = b.seqs, b.jumps
		if repair {
			st.resolved = b.seqs
		}
		advanced, gaps, dupes, settled, err := settleWatermarks(ctx, p.pool, p.cfg.Name, st)
		if err != nil {
			p.heads.forget()
			p.kept.forget()
			return err
		}
		p.heads.settle(b, marks, settled, chained.rows, serving, chained.linked)
		p.kept.settle(b, marks, settled, kept, serving)
		p.noteFailures(st.failures)
		for _, g := range gaps {
			p.gaps.Inc()
			p.log.Warn("projector: a namespace's seqs skip forward; its watermark waits for the missing ones", "namespace", g)
		}
		p.dupes.Add(float64(dupes))
		p.applied.Add(float64(advanced))
		if repair {
			p.repaired.Add(float64(advanced))
		}
		return nil
	})
}

// holdingTables runs fn holding the serving tables' lock shared when this projection
// writes them, so a rebuild's switch never renames them under a batch.
func (p *Projector) holdingTables(ctx context.Context, fn func() error) error {
	if !p.cfg.Tables.IsServing() {
		return fn()
	}
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire a connection for the serving tables' lock: %w", err)
	}
	defer conn.Release()
	return pg.HoldShared(ctx, conn, pg.LockServingTables, fn)
}

func (p *Projector) noteFailures(fs []failure) {
	for _, f := range fs {
		if f.held {
			p.held.Inc()
			continue
		}
		p.failed.Inc()
		p.log.Warn("projector: recorded a record it cannot apply; its namespace is held until the repair pass applies it",
			"namespace", f.ns.org+"/"+f.ns.namespace, "seq", f.ref.seq, "reason", f.reason)
	}
}

// writeBatch opens the batch's revisions and writes their rows, and the audit rows of
// its redactions, to the projection's tables. From reading the data keys until
// ClickHouse has the rows it holds the publishers lock shared: an erasure or a
// redaction that destroys keys after the read waits until these rows landed, and only
// then removes them (scrubAndErase). A namespace with a revision its key does not
// open is taken out of the batch as failures (setAside); the batch it returns is what
// it wrote.
func (p *Projector) writeBatch(ctx context.Context, b batch, marks map[nsKey]int64, heads map[nsKey]string,
	kept map[nsKey]*keptSpace) (batch, []failure, chainedRows, error) {
	link := p.unchained == nil || !p.unchained()
	if len(b.revisions) == 0 && len(b.redactions) == 0 && len(b.documents) == 0 && len(b.erasures) == 0 && len(b.audited) == 0 {
		return b, nil, chainedRows{linked: link}, nil
	}
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return b, nil, chainedRows{}, fmt.Errorf("acquire a connection to read the batch's keys: %w", err)
	}
	defer conn.Release()
	var failed []failure
	var chained []*auditRow
	err = pg.HoldShared(ctx, conn, pg.LockPublishers, func() error {
		var rows []opened
		var graphRows []nsGraph
		var keyless []*events.Envelope
		if len(b.revisions) > 0 {
			keys, err := revisions.FetchKeys(ctx, conn, b.revisions)
			if err != nil {
				return err
			}
			var bad []unopened
			var skipped int
			rows, bad, keyless = openAll(b.revisions, keys, p.sealed)
			b, rows, failed, skipped = setAside(b, rows, bad, marks)
			keyless = inBatch(b, keyless)
			p.sealed.Add(float64(skipped))
		}
		notKept(kept, b, keyless)
		// A redaction's record seals nothing: its audit row names the memory and the
		// version, not the key.
		audits := append([]opened(nil), rows...)
		for _, env := range b.redactions {
			audits = append(audits, opened{env: env, content: &events.Content{}})
		}
		if err := p.faults.beforeInsert(audits); err != nil {
			return err
		}
		var err error
		if chained, graphRows, err = p.writeTables(ctx, b, rows, keyless, marks, heads, kept, link); err != nil {
			return err
		}
		if err := p.writeDocuments(ctx, conn, b.documents); err != nil {
			return err
		}
		p.graphRows.Add(float64(graphRowCount(graphRows)))
		return nil
	})
	return b, failed, chainedRows{rows: chained, linked: link}, err
}

// chainedRows are a batch's audit rows as written, and whether they were linked.
type chainedRows struct {
	rows   []*auditRow
	linked bool
}

// writeTables writes the batch's opened rows, its audit rows and its graph rows to the
// projection's tables, and returns the audit rows and graph rows it wrote. Each of the
// three depends on one read of ClickHouse (the copies' vectors, the audit chains' last
// hashes, the graph's state) and on nothing the others write: each insert starts once
// its own read is in, so the row inserts (most of a batch's work: the vectors) no
// longer wait for the slowest read (in a replay, the chain's and the graph's, 0.3-1.3 s
// a batch on a loaded machine, while the copies read nothing). rows is only read: the
// copies' vectors go into a copy of it.
func (p *Projector) writeTables(ctx context.Context, b batch, rows []opened, keyless []*events.Envelope, marks map[nsKey]int64,
	heads map[nsKey]string, kept map[nsKey]*keptSpace, link bool) (chained []*auditRow, graphRows []nsGraph, err error) {
	cctx, set := p.ch.Ctx(ctx), p.cfg.Tables
	err = all(
		func() error {
			carried, missing, err := carryVectors(cctx, p.ch, set, rows, kept)
			if err != nil {
				return err
			}
			withVectors := rows
			if len(carried) > 0 {
				withVectors = slices.Clone(rows)
				for i, c := range carried {
					withVectors[i].content = c
				}
			}
			p.uncarried.Add(float64(missing))
			if err := writeRows(cctx, p.ch, set, withVectors, nil, nil, p.stems); err != nil {
				return err
			}
			record(kept, withVectors)
			return nil
		},
		func() (err error) {
			if len(b.revisions) == 0 {
				return nil
			}
			if graphRows, err = foldGraph(ctx, p.ch, set, b, rows, marks); err != nil {
				return err
			}
			return writeRows(cctx, p.ch, set, nil, nil, graphRows, p.stems)
		},
		func() (err error) {
			chained, err = chainAudits(ctx, p.ch, set, rows, keyless, b.redactions,
				append(append([]*events.Envelope(nil), b.erasures...), b.audited...), link, heads)
			if err != nil {
				return err
			}
			return writeRows(cctx, p.ch, set, nil, chained, nil, p.stems)
		},
	)
	return chained, graphRows, err
}

// beforeInsert runs the BeforeInsert fault once for each namespace with rows.
func (f Faults) beforeInsert(rows []opened) error {
	if f.BeforeInsert == nil {
		return nil
	}
	seen := map[nsKey]bool{}
	var errs []error
	for _, o := range rows {
		k := nsKey{o.env.Org, o.env.Namespace}
		if seen[k] {
			continue
		}
		seen[k] = true
		if err := f.BeforeInsert(k.org, k.namespace); err != nil {
			errs = append(errs, fmt.Errorf("insert the rows of %s/%s: %w", k.org, k.namespace, err))
		}
	}
	return errors.Join(errs...)
}

// scrubAndErase applies the batch's redactions and erasures to ClickHouse, after
// waiting out every publisher that may still be writing what they remove (another
// projector's batch in flight over a rebalance). Both only touch rows below their
// record's seq, or the versions they name, so the batch's own later rows stay. Both
// reach every set of the projection tables (a rebuild's, one kept after a switch).
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
		fs := make([]*erasure.Fence, len(b.fences))
		for i := range b.fences {
			fs[i] = &b.fences[i]
		}
		if err := revisions.ResolveFences(ctx, p.pool, fs); err != nil {
			return err
		}
		if err := erasure.Erase(p.ch.Ctx(ctx), p.ch, b.fences); err != nil {
			return err
		}
	}
	return nil
}
