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
	s      *Service
	job    *store.Job
	lease  time.Duration
	batch  int
	bytes  int64 // sealed bytes a step reads at most past its first file
	cancel bool  // the fence's last read: a cancel was asked for
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
	return &IngestRun{s: s, job: j, lease: lease, batch: IngestBatch, bytes: IngestStepBytes}, nil
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

// IngestBatch is how many files a step writes in one commit at most, and
// IngestStepBytes how many bytes of them (sealed) a step reads at most, past its
// first file. A step's round trips do not grow with its files, so the more small
// files a step takes, the fewer round trips and commits a file costs: at 16 files
// a step the run waited on Postgres for 5 to 26% of its time in the 100k-chunk
// bench (docs/bench/RESULTS-knowledge-ingest.md). The byte bound keeps a step of
// large files (10 MiB each at most) from holding 64 of them at once.
const (
	IngestBatch     = 64
	IngestStepBytes = 16 << 20
)

// SetBatch sets how many files each step of this run writes in one commit (at least 1).
func (r *IngestRun) SetBatch(n int) { r.batch = max(n, 1) }

// SetStepBytes sets how many sealed bytes of files each step of this run reads at
// most, past its first file (which it always reads).
func (r *IngestRun) SetStepBytes(n int64) { r.bytes = max(n, 1) }

// Step writes the job's next pending files (up to the run's batch) as
// knowledge.upserts in one commit under the job's fence, with each file's outcome;
// with none left, or a cancel asked for, it ends the job (done). A file the parser
// refuses is saved failed with its code, and one whose head holds its content
// unchanged; the job goes on. Its round trips do not grow with the batch: one read of
// the files, one call to the embedder for all their chunks, one read of their heads,
// and the commit's two (commitFenced).
func (r *IngestRun) Step(ctx context.Context) (done bool, err error) {
	k := r.job.JobKey
	files, err := store.NextFiles(ctx, r.s.pool, k, r.batch, r.bytes)
	if err != nil {
		return false, err
	}
	if len(files) == 0 {
		return true, r.end(ctx, store.JobCompleted)
	}
	// The documents are the submitter's writes: their heads name its token.
	p := auth.Principal{Org: k.Org, TokenID: strings.TrimPrefix(r.job.Actor, "token:")}
	items, err := r.prepareFiles(ctx, files)
	if err != nil {
		return false, err
	}
	outs := make([]store.FileOutcome, len(items))
	fence := func(b *pgx.Batch) { store.QueueFence(b, k, r.job.LeaseToken, &r.cancel) }
	// A head another writer moves between the reads and the commit refuses the commit;
	// the step reads the heads again.
	for attempt := 0; ; attempt++ {
		plans, planned, err := r.plan(ctx, items)
		if err != nil {
			return false, err
		}
		save := func(_ context.Context, _ pgx.Tx, b *pgx.Batch, w []Written) error {
			if r.cancel {
				return errCancelled
			}
			for i, it := range planned {
				it.out.State, it.out.Version, it.out.ChunkCount = store.FileWritten, w[i].Version, w[i].ChunkCount
			}
			for i, it := range items {
				outs[i] = it.out
			}
			store.QueueSaveFiles(b, k, r.lease, outs)
			return nil
		}
		_, err = r.s.commitFenced(ctx, p, k.Namespace, plans, fence, save)
		var he *httperr.Error
		switch {
		case errors.Is(err, errCancelled):
			return true, r.end(ctx, store.JobCancelled)
		// A head that moved, or a version an erasure removed since the batch read it:
		// read the heads again (a run whose job the erasure took then stops at its fence).
		case errors.As(err, &he) && (he.Code == httperr.CodePreconditionFailed || he.Code == httperr.CodeNotFound) && attempt < 3:
			continue
		// A file whose record the topic would not take fails alone; the others commit.
		case failTooLarge(items, err):
			continue
		}
		return false, err
	}
}

// failTooLarge fails the file a commit's recordTooLarge refusal names and drops it from
// the step's writes; false when err is no such refusal.
func failTooLarge(items []*fileItem, err error) bool {
	var he *httperr.Error
	if !errors.As(err, &he) || he.Code != CodeTooLarge {
		return false
	}
	uri, _ := he.Extra["source_uri"].(string)
	for _, it := range items {
		if it.doc != nil && it.doc.uri == uri {
			it.doc = nil
			it.out.State, it.out.ErrorCode, it.out.ErrorMessage = store.FileFailed, he.Code, he.Message
			return true
		}
	}
	return false
}

// fileItem is one file of a step: what it is to write (nil: the parser refused it)
// and its outcome.
type fileItem struct {
	out store.FileOutcome
	doc *prepared
}

// prepareFiles parses and chunks a step's files, then embeds all their chunks in one
// call. A file the parser refuses is failed with its code; the embedder down, say,
// fails the step, and the files stay owed.
func (r *IngestRun) prepareFiles(ctx context.Context, files []store.PendingFile) ([]*fileItem, error) {
	items := make([]*fileItem, len(files))
	var docs []*prepared
	for i, f := range files {
		var spec jobFile
		if err := json.Unmarshal(f.Opened, &spec); err != nil {
			return nil, fmt.Errorf("decode the ingestion file %d: %w", f.Ordinal, err)
		}
		in := &DocumentInput{SourceURI: f.SourceURI, Name: spec.Name, ContentType: spec.ContentType, Title: spec.Title,
			Tags: spec.Tags, Metadata: spec.Metadata}
		it := &fileItem{out: store.FileOutcome{Ordinal: f.Ordinal, Bytes: int64(len(spec.Body))}}
		d, perr := r.s.parseBody(ctx, "", in, spec.Body)
		if perr != nil {
			var he *httperr.Error
			if !errors.As(perr, &he) || he.Status >= http.StatusInternalServerError {
				return nil, perr
			}
			it.out.State, it.out.ErrorCode, it.out.ErrorMessage = store.FileFailed, he.Code, he.Message
		} else {
			docs = append(docs, d)
		}
		it.doc = d
		items[i] = it
	}
	if err := r.s.embed(ctx, docs...); err != nil {
		return nil, err
	}
	return items, nil
}

// plan reads the heads of a step's parsed files in one statement and plans each
// file's upsert over its head: a file whose head holds its content unchanged is saved
// unchanged and not written.
func (r *IngestRun) plan(ctx context.Context, items []*fileItem) (plans []*plan, planned []*fileItem, err error) {
	k := r.job.JobKey
	var uris []string
	for _, it := range items {
		if it.doc != nil {
			uris = append(uris, it.doc.uri)
		}
	}
	heads := map[string]*store.Head{}
	if len(uris) > 0 {
		if heads, err = store.ReadMany(ctx, r.s.pool, k.Org, k.Namespace, uris); err != nil {
			return nil, nil, httperr.Store("reading the documents' heads", err)
		}
	}
	for _, it := range items {
		if it.doc == nil {
			continue
		}
		pl := &plan{op: "knowledge.ingest", event: events.TypeDocumentWritten, uri: it.doc.uri, user: r.job.UserID, doc: it.doc}
		it.out.State = ""
		if head := heads[it.doc.uri]; head != nil {
			if head.UserID != pl.user {
				// Another user's source (or the namespace's): the file fails, the job goes on.
				taken := sourceTaken(it.doc.uri)
				it.out.State, it.out.ErrorCode, it.out.ErrorMessage = store.FileFailed, taken.Code, taken.Message
				continue
			}
			pl.read = head.Version
			if !head.Deleted && sameDocument(head.Text, &it.doc.text) {
				it.out.State, it.out.Version, it.out.ChunkCount = store.FileUnchanged, head.Version, head.ChunkCount
				continue
			}
		}
		plans, planned = append(plans, pl), append(planned, it)
	}
	return plans, planned, nil
}

// end ends the job as state under the fence, in two round trips (the fence read
// before anything is written); a job whose cancel was asked for ends cancelled
// whatever state says.
func (r *IngestRun) end(ctx context.Context, state string) error {
	k := r.job.JobKey
	return pg.InPipelinedTx(ctx, r.s.pool, func(tx pgx.Tx) (*pgx.Batch, error) {
		b := &pgx.Batch{}
		var cancel bool
		store.QueueFence(b, k, r.job.LeaseToken, &cancel)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return nil, err
		}
		b = &pgx.Batch{}
		store.QueueEndJob(b, k, state)
		return b, nil
	})
}

// SweepIngestJobs deletes the jobs no run saved for 30 days.
func (s *Service) SweepIngestJobs(ctx context.Context) (int64, error) {
	return store.SweepJobs(ctx, s.pool, IngestJobKeep)
}

// IngestJobKeep is how long a job no run saves is kept.
const IngestJobKeep = 30 * 24 * time.Hour
