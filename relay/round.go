package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	fastjson "github.com/segmentio/encoding/json"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/outbox"
	"github.com/loomplane/loom/internal/tracing"
)

// outboxRow is a record waiting in the outbox.
type outboxRow struct{ outbox.Row }

// ns names the row's namespace as the record key does.
func (o outboxRow) ns() string { return o.Org + "/" + o.Namespace }

// round publishes the oldest rows and returns the ids of those Kafka acknowledged,
// for the round's end to delete (rounds.go). A namespace
// whose oldest row Kafka refused before sends that row alone first (a broker refuses
// a whole partition batch, so only alone does a refusal name its record); a
// namespace waiting out a refusal's backoff is left out of the round altogether.
// conn is the relay's lock session: pending (the oldest rows, read in the lock's round
// trip) and, with WaitForStandbys, the check that the standbys hold them are read
// there, from one server, as are the users of revisions sealed before migration 155
// (outbox.NameUsers; the others' texts name them).
func (r *Relay) round(ctx context.Context, conn *pgxpool.Conn, pending []outbox.Row) ([]int64, error) {
	if len(pending) == 0 {
		return nil, nil
	}
	if unnamed := outbox.OpenTexts(pending, r.unwrap); len(unnamed) > 0 {
		if err := outbox.NameUsers(ctx, conn, unnamed); err != nil {
			return nil, err
		}
	}
	rows := make([]outboxRow, len(pending))
	for i, p := range pending {
		rows[i] = outboxRow{p}
	}
	if r.cfg.WaitForStandbys {
		if err := r.awaitDurable(ctx, conn, len(rows)); err != nil {
			return nil, err
		}
	}
	rest, err := r.retryRefused(ctx, rows)
	if err != nil {
		return nil, err
	}
	return r.publish(ctx, rest)
}

// waiting lists the namespaces whose refused head is still backing off.
func (r *Relay) waiting(now time.Time) []string {
	var out []string
	for ns, at := range r.retryAt {
		if now.Before(at) {
			out = append(out, ns)
		} else {
			delete(r.retryAt, ns)
		}
	}
	return out
}

// retryRefused sends a namespace's previously refused rows at its head alone, one by
// one, and returns the rows left for the batch: those after them, of namespaces whose
// refused rows went through or were parked.
func (r *Relay) retryRefused(ctx context.Context, rows []outboxRow) ([]outboxRow, error) {
	held := map[string]bool{}
	batched := map[string]bool{}
	var rest []outboxRow
	for _, row := range rows {
		ns := row.ns()
		if held[ns] {
			continue
		}
		if batched[ns] || row.Attempts == 0 {
			batched[ns] = true
			rest = append(rest, row)
			continue
		}
		through, err := r.publishAlone(ctx, row)
		if err != nil {
			return nil, err
		}
		if !through {
			held[ns] = true
		}
	}
	return rest, nil
}

// publishAlone produces one refused row by itself. It reports whether the namespace
// may go on: the row was published, or refused once too often and parked.
func (r *Relay) publishAlone(ctx context.Context, row outboxRow) (bool, error) {
	rec, err := r.toRecord(row)
	if err == nil {
		spans := tracing.StartSend(ctx, r.tracer, []*kgo.Record{rec})
		err = r.producer.ProduceSync(ctx, rec).FirstErr()
		spans.End(rec, err)
	}
	if err == nil {
		if err := r.deletePublished(ctx, []int64{row.ID}); err != nil {
			return false, err
		}
		delete(r.retryAt, row.ns())
		return true, nil
	}
	r.failed.Inc()
	if !refused(err) {
		r.noteFailures(ctx, []outboxRow{row}, []error{err})
		return false, fmt.Errorf("produce %s seq %d: %w", row.ns(), row.Seq, err)
	}
	attempts := row.Attempts + 1
	if attempts >= r.cfg.MaxAttempts {
		if err := r.park(ctx, row, attempts, err); err != nil {
			return false, err
		}
		delete(r.retryAt, row.ns())
		return true, nil
	}
	r.noteFailures(ctx, []outboxRow{row}, []error{err})
	r.retryAt[row.ns()] = time.Now().Add(retryDelay(attempts))
	r.log.Warn("relay: Kafka refused a record; retrying it alone", "namespace", row.ns(), "seq", row.Seq,
		"attempts", attempts, "max_attempts", r.cfg.MaxAttempts, "err", err)
	return false, nil
}

// retryDelay is the backoff after a row's nth refusal: 200ms doubling, at most 10s.
func retryDelay(attempts int) time.Duration {
	d := 200 * time.Millisecond
	for i := 1; i < attempts && d < 10*time.Second; i++ {
		d *= 2
	}
	return min(d, 10*time.Second)
}

// publish produces rows in one go and returns the ids to delete. Within a namespace
// only the acknowledged prefix is deleted: a later record acknowledged after an earlier one failed is published again
// after it, so a consumer never sees a namespace's seqs skip forward for good. A
// refusal is counted on its row (which goes alone next round); any other failure is
// Kafka being away, which ends the round so the relay backs off.
func (r *Relay) publish(ctx context.Context, rows []outboxRow) ([]int64, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	errs := make([]error, len(rows))
	var records []*kgo.Record
	rowOf := map[*kgo.Record]int{}
	for i, row := range rows {
		rec, err := r.toRecord(row)
		if err != nil {
			errs[i] = err
			continue
		}
		records = append(records, rec)
		rowOf[rec] = i
	}
	start := time.Now()
	spans := tracing.StartSend(ctx, r.tracer, records)
	// ProduceSync answers in the order the partitions answered, not in the order of
	// its arguments: match each result to its row by the record it carries.
	for _, res := range r.producer.ProduceSync(ctx, records...) {
		errs[rowOf[res.Record]] = res.Err
		spans.End(res.Record, res.Err)
	}
	r.log.Debug("relay: round produced", "records", len(records), "took_ms", time.Since(start).Milliseconds())

	failedNS := map[string]bool{}
	var done []int64
	var failedRows []outboxRow
	var failedErrs []error
	var outage error
	for i, row := range rows {
		if errs[i] == nil {
			if !failedNS[row.ns()] {
				done = append(done, row.ID)
			}
			continue
		}
		r.failed.Inc()
		failedNS[row.ns()] = true
		failedRows, failedErrs = append(failedRows, row), append(failedErrs, errs[i])
		if !refused(errs[i]) && outage == nil {
			outage = fmt.Errorf("produce %s seq %d: %w", row.ns(), row.Seq, errs[i])
		}
	}
	if r.faults.AfterProduce != nil {
		if err := r.faults.AfterProduce(done); err != nil {
			return nil, &faultStop{err}
		}
	}
	r.noteFailures(ctx, failedRows, failedErrs)
	return done, outage
}

// deletePublished removes rows Kafka acknowledged. The delete outlives a cancelled ctx:
// what Kafka acknowledged should not be sent again.
func (r *Relay) deletePublished(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := outbox.Delete(dctx, r.pool, ids); err != nil {
		return err
	}
	r.published.Add(float64(len(ids)))
	return nil
}

// noteFailures records each failed row's error, and counts an attempt on the rows
// Kafka refused (an outage counts nothing: it says nothing about the record).
func (r *Relay) noteFailures(ctx context.Context, rows []outboxRow, errs []error) {
	if len(rows) == 0 {
		return
	}
	ids := make([]int64, len(rows))
	counts := make([]int32, len(rows))
	msgs := make([]string, len(rows))
	for i, row := range rows {
		ids[i], msgs[i] = row.ID, errs[i].Error()
		if refused(errs[i]) {
			counts[i] = 1
		}
	}
	if err := outbox.NoteFailures(ctx, r.pool, ids, counts, msgs); err != nil && ctx.Err() == nil {
		r.log.Warn("relay: cannot record failed produces", "err", err)
	}
}

// errMalformed marks an outbox row that cannot even be made into a record.
var errMalformed = errors.New("malformed outbox row")

// refused reports whether Kafka (or the client on its behalf) refused the record
// itself, so asking again would get the same answer. Errors that say the cluster is
// away or misconfigured (timeouts, authorization, an unknown topic) are not refusals:
// parking every record through an outage or a bad ACL would empty the stream.
func refused(err error) bool {
	switch {
	case errors.Is(err, errMalformed),
		errors.Is(err, kerr.MessageTooLarge),
		errors.Is(err, kerr.RecordListTooLarge),
		errors.Is(err, kerr.InvalidRecord),
		errors.Is(err, kerr.CorruptMessage),
		errors.Is(err, kerr.InvalidTimestamp):
		return true
	}
	return false
}

// toRecord is the Kafka record of a row: a revision's queued by reference has its
// content sealed now, from its journal row (outbox.Complete).
func (r *Relay) toRecord(o outboxRow) (*kgo.Record, error) {
	var pairs [][2]string
	// segmentio's decoder (as heads.OpenText's): the same values with less work than
	// encoding/json's, on every record the relay publishes.
	if err := fastjson.Unmarshal(o.Headers, &pairs); err != nil {
		return nil, fmt.Errorf("%w: row %d headers: %v", errMalformed, o.ID, err)
	}
	value, dataKey, err := outbox.Complete(o.Row, r.unwrap)
	if err != nil {
		return nil, fmt.Errorf("%w: row %d: %v", errMalformed, o.ID, err)
	}
	// Before the produce: the follower may fetch the record before the ack arrives.
	r.handoff.Put(events.RecordID(o.Org, o.Namespace, o.Seq), dataKey)
	rec := &kgo.Record{Topic: o.Topic, Key: o.Key, Value: value}
	for _, p := range pairs {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: p[0], Value: []byte(p[1])})
	}
	return rec, nil
}
