package workers

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/google/uuid"

	kcommand "github.com/loomplane/loom/knowledge/command"
)

// The knowledge_ingest worker runs knowledge.ingest's jobs (loom.knowledge_jobs)
// through the knowledge plane's write side: it takes the oldest job due under a lease
// (a pending job, or one whose run's lease lapsed: a run that died is taken over),
// and writes its files a batch at a time, each commit carrying the job's fence
// (knowledge/command/ingest_run.go). It is a paced loop over the table with no
// consumer group: a submission in this process wakes it, the others find the job at
// their next poll. The same loop deletes the jobs no run saved for 30 days.

// IngestLease is how long a run holds its job between saves; each save renews it.
const IngestLease = time.Minute

// ingestPoll is how often the worker looks for a job when nothing woke it.
const ingestPoll = 2 * time.Second

// ingestSweepEvery is how often it sweeps the expired jobs.
const ingestSweepEvery = time.Hour

// Ingester is the knowledge_ingest worker over the knowledge plane's write side.
type Ingester struct {
	k     *kcommand.Service
	owner string
	log   *slog.Logger
}

// NewIngester returns the worker; owner names this process in the jobs' lease_owner.
func NewIngester(k *kcommand.Service, log *slog.Logger) *Ingester {
	host, _ := os.Hostname()
	return &Ingester{k: k, owner: host + "/" + uuid.NewString()[:8], log: log}
}

// Run runs jobs until ctx ends.
func (w *Ingester) Run(ctx context.Context) error {
	lastSweep := time.Time{}
	for ctx.Err() == nil {
		if time.Since(lastSweep) > ingestSweepEvery {
			if n, err := w.k.SweepIngestJobs(ctx); err != nil && ctx.Err() == nil {
				w.log.Warn("knowledge_ingest: sweeping the expired jobs failed", "err", err)
			} else if n > 0 {
				w.log.Info("knowledge_ingest: expired jobs deleted", "jobs", n)
			}
			lastSweep = time.Now()
		}
		ran, err := w.Once(ctx)
		if err != nil && ctx.Err() == nil {
			w.log.Warn("knowledge_ingest: a run stopped", "err", err)
		}
		if ran {
			continue
		}
		select {
		case <-ctx.Done():
		case <-w.k.IngestWake():
		case <-time.After(ingestPoll):
		}
	}
	return nil
}

// Once takes one job due and runs it to its end (ran false: none was due). A run
// another took over, or whose job an erasure removed, stops without saving more.
func (w *Ingester) Once(ctx context.Context) (ran bool, err error) {
	run, err := w.k.ClaimIngest(ctx, w.owner, IngestLease)
	if err != nil || run == nil {
		return false, err
	}
	j := run.Job()
	err = run.Run(ctx)
	switch {
	case errors.Is(err, kcommand.ErrLeaseLost):
		w.log.Info("knowledge_ingest: another run took the job over; this one stops", "ingestion_id", j.ID)
		return true, nil
	case errors.Is(err, kcommand.ErrJobGone):
		w.log.Info("knowledge_ingest: the job is gone (erased or expired); the run stops", "ingestion_id", j.ID)
		return true, nil
	}
	return true, err
}
