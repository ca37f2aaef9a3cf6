package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/knowledge/store"
)

// An ingestion job's run, which the workers role drives (workers/knowledge_ingest.go):
// ClaimIngest takes the oldest job due under a lease, raising its token, and each
// Step writes one file through the one commit with the job's fence in the commit's
// own transaction, so a run whose lease another took writes nothing more
// (store.ErrLeaseLost) and one whose job an erasure removed stops (store.ErrJobGone).

// ErrLeaseLost and ErrJobGone end a run: it saves nothing more.
var (
	ErrLeaseLost = store.ErrLeaseLost
	ErrJobGone   = store.ErrJobGone
)

// errCancelled ends a step whose job's cancel was asked for: nothing of it is written.
var errCancelled = errors.New("knowledge ingest: the job's cancel was asked for")

// fenced reports whether err is a run's fence refusing a commit (nothing written).
func fenced(err error) bool {
	return errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrJobGone) || errors.Is(err, errCancelled)
}

// IngestRun is one run of a job under its lease.
type IngestRun struct {
	s     *Service
	job   *store.Job
	lease time.Duration
}

// Job is the job as the run took it.
func (r *IngestRun) Job() store.Job { return *r.job }

// ClaimIngest takes the oldest job due for owner under a lease of lease; nil when none
// is due.
func (s *Service) ClaimIngest(ctx context.Context, owner string, lease time.Duration) (*IngestRun, error) {
	return s.ClaimIngestOf(ctx, "", owner, lease)
}

// ClaimIngestOf is ClaimIngest over one org's jobs ("": every org's).
func (s *Service) ClaimIngestOf(ctx context.Context, org, owner string, lease time.Duration) (*IngestRun, error) {
	j, err := store.ClaimJob(ctx, s.pool, org, owner, lease)
	if err != nil || j == nil {
		return nil, err
	}
	return &IngestRun{s: s, job: j, lease: lease}, nil
}

// Run steps the job to its end: nil once it ended (completed or cancelled), or the
// error that stopped it (ErrLeaseLost, ErrJobGone, a store's).
func (r *IngestRun) Run(ctx context.Context) error {
	for {
		done, err := r.Step(ctx)
		if err != nil || done {
			return err
		}
	}
}

// Step writes the job's next pending file as a knowledge.upsert under the job's fence
// and saves its outcome; with none left, or a cancel asked for, it ends the job
// (done). A file the parser refuses is saved failed with its code; the job goes on.
func (r *IngestRun) Step(ctx context.Context) (done bool, err error) {
	k := r.job.JobKey
	f, err := store.NextFile(ctx, r.s.pool, k)
	if err != nil {
		return false, err
	}
	if f == nil {
		return true, r.end(ctx, store.JobCompleted)
	}
	var spec jobFile
	if err := json.Unmarshal(f.Opened, &spec); err != nil {
		return false, fmt.Errorf("decode the ingestion file %d: %w", f.Ordinal, err)
	}
	in := &DocumentInput{SourceURI: f.SourceURI, Name: spec.Name, ContentType: spec.ContentType, Title: spec.Title,
		Tags: spec.Tags, Metadata: spec.Metadata}
	out := store.FileOutcome{Ordinal: f.Ordinal, Bytes: int64(len(spec.Body))}
	// The documents are the submitter's writes: their heads name its token.
	p := auth.Principal{Org: k.Org, TokenID: strings.TrimPrefix(r.job.Actor, "token:")}
	d, perr := r.s.prepareBody(ctx, "", in, spec.Body)
	if perr != nil {
		var he *httperr.Error
		if !errors.As(perr, &he) || he.Status >= http.StatusInternalServerError {
			return false, perr // the embedder down, say: the file stays owed
		}
		out.State, out.ErrorCode, out.ErrorMessage = store.FileFailed, he.Code, he.Message
		return r.saveOnly(ctx, out)
	}
	// A head another writer moves between the read and the commit refuses the commit;
	// the step reads it again.
	for attempt := 0; ; attempt++ {
		head, err := r.s.readHead(ctx, k.Org, k.Namespace, f.SourceURI)
		if err != nil {
			return false, err
		}
		pl := &plan{op: "knowledge.ingest", event: events.TypeDocumentWritten, uri: d.uri, doc: d}
		if head != nil {
			pl.read = head.Version
			if !head.Deleted && sameDocument(head.Text, &d.text) {
				out.State, out.Version, out.ChunkCount = store.FileUnchanged, head.Version, head.ChunkCount
				return r.saveOnly(ctx, out)
			}
		}
		_, err = r.s.commitWith(ctx, p, k.Namespace, []*plan{pl}, func(ctx context.Context, tx pgx.Tx, w []Written) error {
			cancel, err := store.Fence(ctx, tx, k, r.job.LeaseToken, r.lease)
			if err != nil {
				return err
			}
			if cancel {
				return errCancelled
			}
			out.State, out.Version, out.ChunkCount = store.FileWritten, w[0].Version, w[0].ChunkCount
			return store.SaveFile(ctx, tx, k, out)
		})
		var he *httperr.Error
		switch {
		case errors.Is(err, errCancelled):
			return true, r.end(ctx, store.JobCancelled)
		case errors.As(err, &he) && he.Code == httperr.CodePreconditionFailed && attempt < 3:
			continue
		}
		return false, err
	}
}

// saveOnly saves a file's outcome that commits no document, under the fence.
func (r *IngestRun) saveOnly(ctx context.Context, out store.FileOutcome) (bool, error) {
	k := r.job.JobKey
	cancelled := false
	err := pg.InTx(ctx, r.s.pool, func(tx pgx.Tx) error {
		cancel, err := store.Fence(ctx, tx, k, r.job.LeaseToken, r.lease)
		if err != nil {
			return err
		}
		if cancel {
			cancelled = true
			return store.EndJob(ctx, tx, k, store.JobCancelled)
		}
		return store.SaveFile(ctx, tx, k, out)
	})
	return cancelled, err
}

// end ends the job as state under the fence; a job whose cancel was asked for ends
// cancelled whatever state says.
func (r *IngestRun) end(ctx context.Context, state string) error {
	k := r.job.JobKey
	return pg.InTx(ctx, r.s.pool, func(tx pgx.Tx) error {
		cancel, err := store.Fence(ctx, tx, k, r.job.LeaseToken, r.lease)
		if err != nil {
			return err
		}
		if cancel {
			state = store.JobCancelled
		}
		return store.EndJob(ctx, tx, k, state)
	})
}

// SweepIngestJobs deletes the jobs no run saved for 30 days.
func (s *Service) SweepIngestJobs(ctx context.Context) (int64, error) {
	return store.SweepJobs(ctx, s.pool, IngestJobKeep)
}

// IngestJobKeep is how long a job no run saves is kept.
const IngestJobKeep = 30 * 24 * time.Hour
