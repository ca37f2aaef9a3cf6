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
	batch int
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
	return &IngestRun{s: s, job: j, lease: lease, batch: IngestBatch}, nil
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

// IngestBatch is how many files a step writes in one commit.
const IngestBatch = 16

// SetBatch sets how many files each step of this run writes in one commit (at least 1).
func (r *IngestRun) SetBatch(n int) { r.batch = max(n, 1) }

// Step writes the job's next pending files (up to the run's batch) as
// knowledge.upserts in one commit under the job's fence, with each file's outcome;
// with none left, or a cancel asked for, it ends the job (done). A file the parser
// refuses is saved failed with its code, and one whose head holds its content
// unchanged; the job goes on.
func (r *IngestRun) Step(ctx context.Context) (done bool, err error) {
	k := r.job.JobKey
	files, err := store.NextFiles(ctx, r.s.pool, k, r.batch)
	if err != nil {
		return false, err
	}
	if len(files) == 0 {
		return true, r.end(ctx, store.JobCompleted)
	}
	// The documents are the submitter's writes: their heads name its token.
	p := auth.Principal{Org: k.Org, TokenID: strings.TrimPrefix(r.job.Actor, "token:")}
	type item struct {
		out store.FileOutcome
		doc *prepared
	}
	items := make([]*item, len(files))
	for i, f := range files {
		var spec jobFile
		if err := json.Unmarshal(f.Opened, &spec); err != nil {
			return false, fmt.Errorf("decode the ingestion file %d: %w", f.Ordinal, err)
		}
		in := &DocumentInput{SourceURI: f.SourceURI, Name: spec.Name, ContentType: spec.ContentType, Title: spec.Title,
			Tags: spec.Tags, Metadata: spec.Metadata}
		it := &item{out: store.FileOutcome{Ordinal: f.Ordinal, Bytes: int64(len(spec.Body))}}
		d, perr := r.s.prepareBody(ctx, "", in, spec.Body)
		if perr != nil {
			var he *httperr.Error
			if !errors.As(perr, &he) || he.Status >= http.StatusInternalServerError {
				return false, perr // the embedder down, say: the files stay owed
			}
			it.out.State, it.out.ErrorCode, it.out.ErrorMessage = store.FileFailed, he.Code, he.Message
		}
		it.doc = d
		items[i] = it
	}
	// A head another writer moves between the reads and the commit refuses the commit;
	// the step reads the heads again.
	for attempt := 0; ; attempt++ {
		var plans []*plan
		var planned []*item
		for _, it := range items {
			if it.doc == nil {
				continue
			}
			head, err := r.s.readHead(ctx, k.Org, k.Namespace, it.doc.uri)
			if err != nil {
				return false, err
			}
			pl := &plan{op: "knowledge.ingest", event: events.TypeDocumentWritten, uri: it.doc.uri, doc: it.doc}
			it.out.State = ""
			if head != nil {
				pl.read = head.Version
				if !head.Deleted && sameDocument(head.Text, &it.doc.text) {
					it.out.State, it.out.Version, it.out.ChunkCount = store.FileUnchanged, head.Version, head.ChunkCount
					continue
				}
			}
			plans, planned = append(plans, pl), append(planned, it)
		}
		save := func(ctx context.Context, tx pgx.Tx, w []Written) error {
			cancel, err := store.Fence(ctx, tx, k, r.job.LeaseToken, r.lease)
			if err != nil {
				return err
			}
			if cancel {
				return errCancelled
			}
			for i, it := range planned {
				it.out.State, it.out.Version, it.out.ChunkCount = store.FileWritten, w[i].Version, w[i].ChunkCount
			}
			for _, it := range items {
				if err := store.SaveFile(ctx, tx, k, it.out); err != nil {
					return err
				}
			}
			return nil
		}
		if len(plans) == 0 {
			err = pg.InTx(ctx, r.s.pool, func(tx pgx.Tx) error { return save(ctx, tx, nil) })
		} else {
			_, err = r.s.commitWith(ctx, p, k.Namespace, plans, save)
		}
		var he *httperr.Error
		switch {
		case errors.Is(err, errCancelled):
			return true, r.end(ctx, store.JobCancelled)
		// A head that moved, or a version an erasure removed since the batch read it:
		// read the heads again (a run whose job the erasure took then stops at its fence).
		case errors.As(err, &he) && (he.Code == httperr.CodePreconditionFailed || he.Code == httperr.CodeNotFound) && attempt < 3:
			continue
		}
		return false, err
	}
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
