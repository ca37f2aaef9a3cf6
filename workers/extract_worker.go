package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/command/extraction"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/extractqueue"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/periodic"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/shutdown"
)

// The extraction workers are one Kafka consumer group of the request topic: every
// command process with LOOM_EXTRACTION_QUEUE_ENABLED joins it, so the processes share
// the topic's partitions, and a stopped worker's partitions move to the others. A
// worker claims each record's request in the authority under a lease (renewed while it
// runs), runs memory.set_from_messages' pipeline as the request's token, and marks the
// request done in the transaction that commits its facts, so a request is written at
// most once however often its record is delivered. What cannot run now goes back to
// the authority with its next attempt's time; each worker's housekeeping queues a new
// record for every request that is due again (a backoff over, a lease lapsed), so the
// topic's offsets never wait on a request.

// ExtractionGroup is the extraction workers' consumer group.
const ExtractionGroup = "loom-extraction"

// ExtractionConsumerOpts are the kgo options of an extraction worker's consumer: it
// commits a record's offset once the record is handled (its request done, released or
// not claimable), and a rebalance commits what was handled.
func (s *Service) ExtractionConsumerOpts() []kgo.Opt {
	x := s.extraction
	return []kgo.Opt{
		kgo.ConsumerGroup(ExtractionGroup),
		kgo.ConsumeTopics(x.Topic),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(time.Second),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.SessionTimeout(x.SessionTimeout),
		kgo.HeartbeatInterval(min(3*time.Second, x.SessionTimeout/3)),
	}
}

// extractionWorker is one process's worker.
type extractionWorker struct {
	s *Service

	mu          sync.Mutex
	pausedUntil time.Time // no call before it: the provider refused the key or the model
	stopped     bool      // the provider's refusal was warned of
	transient   int       // transient failures in a row, for their backoff
}

// RunExtractionWorker consumes the request topic with consumer, built with
// ExtractionConsumerOpts, until ctx ends; a request under way then finishes within
// LOOM_SHUTDOWN_GRACE_MS, or is left to its lease. Without a provider it runs nothing:
// deferred requests stay pending until one is configured.
func (s *Service) RunExtractionWorker(ctx context.Context, consumer *kgo.Client) error {
	if s.models == nil || !s.models.Configured() {
		s.log.Warn("extraction_queue: no model provider is configured; deferred extractions stay pending (set LOOM_LLM_BASE_URL and LOOM_LLM_MODEL)")
		<-ctx.Done()
		return nil
	}
	w := &extractionWorker{s: s}
	hctx, stopHousekeeping := context.WithCancel(ctx)
	defer stopHousekeeping()
	go w.housekeep(hctx)
	sem := make(chan struct{}, s.extraction.Concurrency)
	for {
		fetches := consumer.PollRecords(ctx, 500)
		if ctx.Err() != nil {
			return nil
		}
		fetches.EachError(func(topic string, part int32, err error) {
			s.log.Warn("extraction_queue: fetch failed", "topic", topic, "partition", part, "err", err)
		})
		var wg sync.WaitGroup
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				for _, rec := range p.Records {
					if !w.handle(ctx, rec) {
						return // stopping: the rest of the partition is redelivered
					}
					consumer.MarkCommitRecords(rec)
				}
			}()
		})
		wg.Wait()
	}
}

// handle runs one record's request and reports whether the record is handled (its
// offset may be committed): false only when the worker stops with the request in hand.
func (w *extractionWorker) handle(ctx context.Context, rec *kgo.Record) bool {
	s := w.s
	r, err := events.DecodeExtraction(rec.Value)
	if err != nil {
		s.extractions.With("undecodable").Inc()
		s.log.Warn("extraction_queue: a record is not an extraction request; skipped", "partition", rec.Partition, "offset", rec.Offset, "err", err)
		return true
	}
	if until, paused := w.paused(); paused {
		w.retryStore(ctx, "postpone", func(ctx context.Context) error {
			return extractqueue.Postpone(ctx, s.pool, r.Org, r.QueueID, until)
		})
		return true
	}
	var claim *extractqueue.Claim
	if !w.retryStore(ctx, "claim", func(ctx context.Context) (err error) {
		claim, err = extractqueue.TryClaim(ctx, s.pool, r.Org, r.QueueID, s.extraction.Lease)
		return err
	}) {
		return false
	}
	if claim == nil {
		s.extractions.With("not_claimable").Inc()
		return true // done, failed, erased, not due, or another worker's
	}
	// The request under way finishes within the shutdown grace; its lease is renewed
	// while it runs, and a lost lease cuts it.
	rctx, done := shutdown.Outlive(ctx, s.pipe.ShutdownGrace)
	defer done()
	rctx, cancel := context.WithTimeout(rctx, s.extraction.Deadline)
	defer cancel()
	var lost atomic.Bool
	go w.renew(rctx, func() { lost.Store(true); cancel() }, claim)
	err = w.run(rctx, claim, r)
	if lost.Load() {
		err = extractqueue.ErrLost
	}
	return w.settle(ctx, claim, err)
}

// recordBudget bounds storing a finished request's answer.
const recordBudget = 10 * time.Second

// run opens the request and runs its pipeline as the token that enqueued it.
func (w *extractionWorker) run(ctx context.Context, c *extractqueue.Claim, r *events.ExtractionRequest) error {
	s := w.s
	payload, err := events.OpenExtraction(c.DataKey, c.Org, c.QueueID, r.Sealed)
	if err != nil {
		return fmt.Errorf("open the request: %w", err)
	}
	var req extraction.Request
	if err := json.Unmarshal(payload, &req); err != nil {
		return fmt.Errorf("decode the request: %w", err)
	}
	id := memrow.Identity{Org: c.Org, Namespace: c.Namespace, Agent: c.Agent, UserID: c.UserID, SessionID: c.SessionID}
	pl := &extraction.Pipeline{Pool: s.pool, Models: s.models, Log: s.log, Config: s.extraction, Registered: s.cmd.ExtractionSteps()}
	steps, err := pl.Check(&req, id)
	if err != nil {
		return err
	}
	p := auth.Principal{TokenID: c.TokenID, Org: c.Org, Role: c.TokenRole, ReadUserID: c.ReadUser}
	// The transcript's turns commit with the facts drawn from them (command.Inputs).
	var in *command.Inputs
	if !req.DryRun {
		if in, err = s.cmd.SealInputs(ctx, id, req.Messages); err != nil {
			return err
		}
	}
	finished := false
	writer := s.cmd.FactWriter(c.QueueID, in, func(ctx context.Context, tx pgx.Tx) error {
		err := extractqueue.Finish(ctx, tx, c, nil)
		finished = err == nil
		return err
	})
	ans, err := pl.Run(ctx, extraction.Run{Principal: p, Namespace: c.Namespace, Identity: id, Request: &req, Writer: writer}, steps)
	if err != nil {
		return err
	}
	if !ans.DryRun {
		ans.TurnIDs = s.cmd.KeepInputs(ctx, in, ans.Facts)
	}
	result, err := json.Marshal(ans)
	if err != nil {
		return err
	}
	if finished {
		// The facts and the done mark committed together; the answer is only a record.
		// The done mark ended the lease, so the renewer may cut ctx now: the record is
		// stored under a context of its own.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordBudget)
		defer cancel()
		if err := extractqueue.Record(rctx, s.pool, c, result); err != nil {
			s.log.Warn("extraction_queue: the request is done but its result was not stored", "queue_id", c.QueueID, "err", err)
		}
		return nil
	}
	return extractqueue.Finish(ctx, s.pool, c, result)
}

// settle decides what becomes of a request its run left, and reports whether its
// record is handled. A run the worker's stop cut leaves the request to its lease.
func (w *extractionWorker) settle(ctx context.Context, c *extractqueue.Claim, err error) bool {
	s := w.s
	x := s.extraction
	var le *llm.Error
	var he *httperr.Error
	release := extractqueue.Release{Status: extractqueue.StatusPending, MaxAttempts: x.MaxAttempts}
	if err != nil {
		release.Error = err.Error()
	}
	switch {
	case err == nil:
		w.answered()
		s.extractions.With("done").Inc()
		return true
	case errors.Is(err, extractqueue.ErrLost):
		s.extractions.With("lost").Inc()
		s.log.Info("extraction_queue: the request is no longer this worker's (erased, or taken over)", "queue_id", c.QueueID)
		return true
	case pg.OutcomeUnknown(err):
		// Its facts and its done mark committed together or not at all: whoever claims
		// it next finds it done, or runs it.
		s.extractions.With("outcome_unknown").Inc()
		return false
	case ctx.Err() != nil:
		s.extractions.With("cut").Inc()
		return false
	case errors.As(err, &le) && le.Class == llm.ClassStopped:
		w.stop(le)
		release.After = x.Pause
	case errors.As(err, &le) && le.Class == llm.ClassCapped:
		release.Status, release.After = extractqueue.StatusHeld, max(le.RetryAfter, time.Second)
	case errors.As(err, &le) && (le.Class == llm.ClassTransient || le.Class == llm.ClassNotConfigured):
		release.After = max(le.RetryAfter, w.backoff())
	case errors.As(err, &he) && he.Retryable:
		release.After = max(he.RetryAfter, w.backoff())
	default:
		release.CountAttempt = true
		release.After = retryDelayAfter(x.RetryBase, c.Attempts+1)
	}
	var status string
	var gave error
	if !w.retryStore(ctx, "release", func(ctx context.Context) error {
		status, gave = extractqueue.Give(ctx, s.pool, c, release)
		return gave
	}) {
		return false
	}
	if errors.Is(gave, extractqueue.ErrLost) {
		s.extractions.With("lost").Inc()
		return true
	}
	s.extractions.With(status).Inc()
	if status == extractqueue.StatusFailed {
		s.log.Warn("extraction_queue: a request failed after its last attempt; memory.extraction_retry_mine gives it one more",
			"queue_id", c.QueueID, "namespace", c.Namespace, "attempts", x.MaxAttempts, "err", err)
	} else if release.CountAttempt {
		s.log.Info("extraction_queue: a request failed; retrying after a backoff", "queue_id", c.QueueID, "attempt", c.Attempts+1, "err", err)
	}
	return true
}

// retryDelayAfter is the backoff after the nth counted failure: base, doubled per
// attempt, at most an hour.
func retryDelayAfter(base time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < time.Hour; i++ {
		d *= 2
	}
	return min(d, time.Hour)
}

// renew extends a claim's lease every third of it until ctx ends; a claim no longer
// the row's cuts the run.
func (w *extractionWorker) renew(ctx context.Context, cut context.CancelFunc, c *extractqueue.Claim) {
	lease := w.s.extraction.Lease
	t := time.NewTicker(lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			err := extractqueue.Renew(ctx, w.s.pool, c, lease)
			if errors.Is(err, extractqueue.ErrLost) {
				cut()
				return
			}
		}
	}
}

// retryStore runs a statement of the authority until it succeeds or ctx ends, waiting
// out a Postgres that is away; false when ctx ended first.
func (w *extractionWorker) retryStore(ctx context.Context, what string, fn func(context.Context) error) bool {
	wait := 200 * time.Millisecond
	for {
		err := fn(ctx)
		if err == nil || errors.Is(err, extractqueue.ErrLost) {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		w.s.log.Warn("extraction_queue: Postgres refused a statement; retrying", "statement", what, "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
}

// housekeep queues, every LOOM_EXTRACTION_POLL_MS, a record for each request due one.
func (w *extractionWorker) housekeep(ctx context.Context) {
	s := w.s
	stale := s.extraction.TopicRetention / 2
	periodic.Every(ctx, s.extraction.Poll, func() {
		if _, paused := w.paused(); paused {
			return
		}
		if _, err := extractqueue.Requeue(ctx, s.pool, 100, stale, s.cmd.RequestRecords(ctx)); err != nil && ctx.Err() == nil {
			s.log.Warn("extraction_queue: cannot queue records for due requests", "err", err)
		}
	})
}

func (w *extractionWorker) paused() (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pausedUntil, time.Now().Before(w.pausedUntil)
}

// stop pauses the worker after the provider refused its key or model, warning once
// until a call is answered again.
func (w *extractionWorker) stop(e *llm.Error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pausedUntil = time.Now().Add(w.s.extraction.Pause)
	if !w.stopped {
		w.stopped = true
		w.s.log.Warn("extraction_queue: the model provider refused the key or the model; no extraction runs until an operator fixes "+
			"LOOM_LLM_API_KEY or LOOM_EXTRACTION_MODEL (the worker tries again every LOOM_EXTRACTION_PAUSE_MS)",
			"provider_status", e.Status, "model", e.Model, "pause", w.s.extraction.Pause)
	}
}

// answered notes a request that ran: an earlier refusal or outage is over.
func (w *extractionWorker) answered() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		w.s.log.Info("extraction_queue: the model provider answers again")
	}
	w.stopped, w.transient = false, 0
}

// backoff is the wait after a transient failure: 1 s doubling with each in a row, at
// most LOOM_EXTRACTION_PAUSE_MS. It spends no attempt.
func (w *extractionWorker) backoff() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.transient++
	return min(retryDelayAfter(time.Second, w.transient), w.s.extraction.Pause)
}
