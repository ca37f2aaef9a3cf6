package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
)

// The statements of knowledge.ingest's jobs, loom.knowledge_jobs and
// loom.knowledge_job_files (migration 110). A run holds its job by its lease token:
// every save locks the job's row and names the token (QueueFence), so a run whose
// lease another took saves nothing more.

// Job states.
const (
	JobPending    = "pending"
	JobProcessing = "processing"
	JobCompleted  = "completed"
	JobFailed     = "failed"
	JobCancelled  = "cancelled"
)

// File states.
const (
	FilePending   = "pending"
	FileWritten   = "written"
	FileUnchanged = "unchanged"
	FileFailed    = "failed"
	FileCancelled = "cancelled"
)

// LabelIngest derives the key that seals a job's files from its data key.
const LabelIngest = "loom.ingest"

// JobKey names a job.
type JobKey struct {
	Org, Namespace, ID string
}

// Job is a job's row, its data key left out.
type Job struct {
	JobKey
	State                                        string
	Actor                                        string
	UserID                                       string // the documents' user ("" the namespace's)
	Total, Processed, Written, Unchanged, Failed int
	Chunks                                       int
	Bytes                                        int64
	LeaseOwner                                   string
	LeaseUntil                                   *time.Time
	LeaseToken                                   int64
	Runs                                         int
	CancelRequestedAt                            *time.Time
	CancelledBy                                  string
	CreatedAt, UpdatedAt                         time.Time
	FinishedAt                                   *time.Time
}

// JobFile is one file of a job as its status shows it.
type JobFile struct {
	Ordinal      int    `json:"ordinal"`
	SourceURI    string `json:"source_uri"`
	State        string `json:"state"`
	Bytes        int64  `json:"bytes"`
	Version      *int64 `json:"version,omitempty"`
	ChunkCount   int    `json:"chunk_count"`
	ErrorCode    string `json:"error_code,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
}

// NewFile is a file a submission commits: its body sealed under the job's key.
type NewFile struct {
	SourceURI string
	Bytes     int64
	Sealed    []byte
}

// Errors of a run's save.
var (
	// ErrLeaseLost: another run took the job; this one saves nothing more.
	ErrLeaseLost = errors.New("knowledge ingest: the job's lease was taken by another run")
	// ErrJobGone: the job has no row (an erasure removed it, or it expired).
	ErrJobGone = errors.New("knowledge ingest: the job is gone")
	// ErrNoJob: a read found no such job.
	ErrNoJob = errors.New("knowledge ingest: no such job")
)

const jobColumns = `org, namespace, ingestion_id::text, state, actor, loom.user_name(org, user_id), total, processed, written, unchanged, failed, chunks, bytes,
	lease_owner, lease_until, lease_token, runs, cancel_requested_at, cancelled_by, created_at, updated_at, finished_at`

func scanJob(r pgx.Row) (*Job, error) {
	j := &Job{}
	err := r.Scan(&j.Org, &j.Namespace, &j.ID, &j.State, &j.Actor, &j.UserID, &j.Total, &j.Processed, &j.Written, &j.Unchanged, &j.Failed,
		&j.Chunks, &j.Bytes, &j.LeaseOwner, &j.LeaseUntil, &j.LeaseToken, &j.Runs, &j.CancelRequestedAt, &j.CancelledBy,
		&j.CreatedAt, &j.UpdatedAt, &j.FinishedAt)
	return j, err
}

// InsertJob commits a job and its files in tx; gen is the namespace's generation read
// at the submission, userID the documents' user ("" the namespace's), wrappedKey the
// job's data key wrapped under the KEK.
func InsertJob(ctx context.Context, tx pgx.Tx, k JobKey, gen int64, actor, userID string, wrappedKey []byte, files []NewFile) error {
	var total int64
	for _, f := range files {
		total += f.Bytes
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO loom.knowledge_jobs (org, namespace, ingestion_id, gen, state, actor, total, data_key, user_id)
		VALUES ($1, $2, $3::uuid, $4, 'pending', $5, $6, $7, loom.named_user($1, $8))`, k.Org, k.Namespace, k.ID, gen, actor, len(files), wrappedKey, userID)
	uris, sizes, sealed, ords := make([]string, len(files)), make([]int64, len(files)), make([][]byte, len(files)), make([]int32, len(files))
	for i, f := range files {
		uris[i], sizes[i], sealed[i], ords[i] = f.SourceURI, f.Bytes, f.Sealed, int32(i)
	}
	b.Queue(`INSERT INTO loom.knowledge_job_files (org, namespace, ingestion_id, ordinal, source_uri, state, bytes, sealed)
		SELECT $1, $2, $3::uuid, o, u, 'pending', n, s FROM unnest($4::int[], $5::text[], $6::bigint[], $7::bytea[]) AS f(o, u, n, s)`,
		k.Org, k.Namespace, k.ID, ords, uris, sizes, sealed)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("insert the ingestion job: %w", err)
	}
	return nil
}

// ReadJob reads a job; ErrNoJob when there is none.
func ReadJob(ctx context.Context, q Querier, k JobKey) (*Job, error) {
	j, err := scanJob(q.QueryRow(ctx, `SELECT `+jobColumns+` FROM loom.knowledge_jobs
		WHERE org = $1 AND namespace = $2 AND ingestion_id = $3::uuid`, k.Org, k.Namespace, k.ID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNoJob
	}
	if err != nil {
		return nil, fmt.Errorf("read the ingestion job: %w", err)
	}
	return j, nil
}

// ReadJobFiles reads a job's files in order, without their bodies.
func ReadJobFiles(ctx context.Context, q Querier, k JobKey) ([]JobFile, error) {
	rows, err := q.Query(ctx, `SELECT ordinal, source_uri, state, bytes, version, chunk_count, error_code, error_message
		FROM loom.knowledge_job_files WHERE org = $1 AND namespace = $2 AND ingestion_id = $3::uuid ORDER BY ordinal`,
		k.Org, k.Namespace, k.ID)
	if err != nil {
		return nil, fmt.Errorf("read the ingestion job's files: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (JobFile, error) {
		var f JobFile
		err := r.Scan(&f.Ordinal, &f.SourceURI, &f.State, &f.Bytes, &f.Version, &f.ChunkCount, &f.ErrorCode, &f.ErrorMessage)
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the ingestion job's files: %w", err)
	}
	return out, nil
}

// ClaimJob takes the oldest job due (pending, or processing under a lapsed lease) for
// owner under a lease of lease, raising its token; nil when none is due. A job with a
// cancel asked for is taken too, so its run ends it. org, when not empty, takes only
// that org's jobs.
func ClaimJob(ctx context.Context, q Querier, org, owner string, lease time.Duration) (*Job, error) {
	j, err := scanJob(q.QueryRow(ctx, `UPDATE loom.knowledge_jobs j SET state = 'processing', lease_owner = $1,
			lease_until = now() + $2::interval, lease_token = j.lease_token + 1, runs = j.runs + 1, updated_at = now()
		WHERE (j.org, j.namespace, j.ingestion_id) = (SELECT org, namespace, ingestion_id FROM loom.knowledge_jobs
			WHERE state IN ('pending', 'processing') AND (state = 'pending' OR lease_until < now()) AND ($3 = '' OR org = $3)
			ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING `+jobColumns, owner, lease.String(), org))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim an ingestion job: %w", err)
	}
	return j, nil
}

// QueueFence queues, on b, the lock of a job's row and the check that token still
// holds it: reading the batch's results fails with ErrJobGone when the job has no row
// and ErrLeaseLost when another run took it, and otherwise sets cancel to whether a
// cancel was asked for. The lease is renewed by the save that follows in the same
// transaction (QueueSaveFiles, QueueEndJob).
func QueueFence(b *pgx.Batch, k JobKey, token int64, cancel *bool) {
	b.Queue(`SELECT lease_token, cancel_requested_at IS NOT NULL FROM loom.knowledge_jobs
		WHERE org = $1 AND namespace = $2 AND ingestion_id = $3::uuid FOR UPDATE`, k.Org, k.Namespace, k.ID).
		QueryRow(func(r pgx.Row) error {
			var held int64
			err := r.Scan(&held, cancel)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				return ErrJobGone
			case err != nil:
				return fmt.Errorf("fence the ingestion job: %w", err)
			case held != token:
				return ErrLeaseLost
			}
			return nil
		})
}

// PendingFile is the next file a run owes, its body opened.
type PendingFile struct {
	Ordinal   int
	SourceURI string
	Opened    []byte // the sealed description and body, opened
}

// NextFiles reads a job's first n pending files, in order, with their bodies opened
// under the job's key (unwrapped by the session's KEKs); none when none is pending.
// It stops before the file that would take the sealed bytes read past maxBytes (0: no
// bound), but always reads the first, so a run of many small files takes many a step
// and a run of large ones holds few in memory at once.
func NextFiles(ctx context.Context, q Querier, k JobKey, n int, maxBytes int64) ([]PendingFile, error) {
	if maxBytes <= 0 {
		maxBytes = math.MaxInt64
	}
	// length() of a bytea reads its stored size without detoasting it; only the files
	// kept are opened.
	rows, err := q.Query(ctx, `SELECT f.ordinal, f.source_uri,
			decrypt(f.sealed, hmac('`+LabelIngest+`'::bytea, loom.unwrapped_key(j.data_key), 'sha256'), 'aes')
		FROM (SELECT f.org, f.namespace, f.ingestion_id, f.ordinal, f.source_uri, f.sealed,
				sum(length(f.sealed)) OVER (ORDER BY f.ordinal ROWS UNBOUNDED PRECEDING) - length(f.sealed) AS before
			FROM loom.knowledge_job_files f
			WHERE f.org = $1 AND f.namespace = $2 AND f.ingestion_id = $3::uuid AND f.state = 'pending'
			ORDER BY f.ordinal LIMIT $4) f
		JOIN loom.knowledge_jobs j USING (org, namespace, ingestion_id)
		WHERE f.before = 0 OR f.before + length(f.sealed) <= $5
		ORDER BY f.ordinal`, k.Org, k.Namespace, k.ID, n, maxBytes)
	if err != nil {
		return nil, fmt.Errorf("read the ingestion job's next files: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PendingFile, error) {
		var f PendingFile
		err := r.Scan(&f.Ordinal, &f.SourceURI, &f.Opened)
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the ingestion job's next files: %w", err)
	}
	return out, nil
}

// FileOutcome is what a run did with one file.
type FileOutcome struct {
	Ordinal      int
	State        string // FileWritten, FileUnchanged or FileFailed
	Version      int64
	ChunkCount   int
	Bytes        int64
	ErrorCode    string
	ErrorMessage string
}

// QueueSaveFiles queues, on b, in a transaction that holds the job's fence, the
// outcomes of a run's files and the job's progress, renewing its lease by lease; the
// files' bodies go. One statement for the files and one for the job, however many.
func QueueSaveFiles(b *pgx.Batch, k JobKey, lease time.Duration, outs []FileOutcome) {
	n := len(outs)
	ords, states, versions, chunks := make([]int32, n), make([]string, n), make([]*int64, n), make([]int32, n)
	codes, messages := make([]string, n), make([]string, n)
	var written, unchanged, failed, chunkSum, bytes int64
	for i, o := range outs {
		ords[i], states[i], chunks[i], codes[i], messages[i] = int32(o.Ordinal), o.State, int32(o.ChunkCount), o.ErrorCode, o.ErrorMessage
		if o.State != FileFailed {
			versions[i] = &outs[i].Version
		}
		switch o.State {
		case FileWritten:
			written++
		case FileUnchanged:
			unchanged++
		case FileFailed:
			failed++
		}
		chunkSum, bytes = chunkSum+int64(o.ChunkCount), bytes+o.Bytes
	}
	b.Queue(`UPDATE loom.knowledge_job_files f SET state = o.state, version = o.version, chunk_count = o.chunks,
			error_code = o.code, error_message = o.message, sealed = NULL
		FROM unnest($4::int[], $5::text[], $6::bigint[], $7::int[], $8::text[], $9::text[]) AS o(ordinal, state, version, chunks, code, message)
		WHERE f.org = $1 AND f.namespace = $2 AND f.ingestion_id = $3::uuid AND f.ordinal = o.ordinal`,
		k.Org, k.Namespace, k.ID, ords, states, versions, chunks, codes, messages)
	b.Queue(`UPDATE loom.knowledge_jobs SET processed = processed + $4, written = written + $5, unchanged = unchanged + $6,
			failed = failed + $7, chunks = chunks + $8, bytes = bytes + $9, lease_until = now() + $10::interval, updated_at = now()
		WHERE org = $1 AND namespace = $2 AND ingestion_id = $3::uuid`,
		k.Org, k.Namespace, k.ID, n, written, unchanged, failed, chunkSum, bytes, lease.String())
}

// QueueEndJob queues, on b, in a transaction that holds the job's fence, the end of
// the job as state (cancelled, whatever state says, when a cancel was asked for): its
// lease is released, the files still pending are cancelled and every body goes.
func QueueEndJob(b *pgx.Batch, k JobKey, state string) {
	b.Queue(`UPDATE loom.knowledge_job_files SET state = CASE WHEN state = 'pending' THEN 'cancelled' ELSE state END, sealed = NULL
		WHERE org = $1 AND namespace = $2 AND ingestion_id = $3::uuid AND sealed IS NOT NULL`, k.Org, k.Namespace, k.ID)
	b.Queue(`UPDATE loom.knowledge_jobs SET state = CASE WHEN cancel_requested_at IS NULL THEN $4 ELSE 'cancelled' END,
			lease_owner = '', lease_until = NULL, updated_at = now(), finished_at = now()
		WHERE org = $1 AND namespace = $2 AND ingestion_id = $3::uuid`, k.Org, k.Namespace, k.ID, state)
}

// CancelJob asks for a job's cancel for actor: a pending job ends cancelled at once
// (its files' bodies go); a processing one keeps running until its run's next save
// reads the cancel. It answers the job as it is after; ErrNoJob when there is none.
func CancelJob(ctx context.Context, tx pgx.Tx, k JobKey, actor string) (*Job, error) {
	j, err := scanJob(tx.QueryRow(ctx, `UPDATE loom.knowledge_jobs SET
			cancel_requested_at = CASE WHEN state IN ('pending', 'processing') THEN coalesce(cancel_requested_at, now()) ELSE cancel_requested_at END,
			cancelled_by = CASE WHEN state IN ('pending', 'processing') AND cancel_requested_at IS NULL THEN $4 ELSE cancelled_by END,
			finished_at = CASE WHEN state = 'pending' THEN now() ELSE finished_at END,
			updated_at = now(),
			state = CASE WHEN state = 'pending' THEN 'cancelled' ELSE state END
		WHERE org = $1 AND namespace = $2 AND ingestion_id = $3::uuid RETURNING `+jobColumns, k.Org, k.Namespace, k.ID, actor))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNoJob
	}
	if err != nil {
		return nil, fmt.Errorf("cancel the ingestion job: %w", err)
	}
	if j.State == JobCancelled {
		if _, err := tx.Exec(ctx, `UPDATE loom.knowledge_job_files SET state = 'cancelled', sealed = NULL
			WHERE org = $1 AND namespace = $2 AND ingestion_id = $3::uuid AND state = 'pending'`, k.Org, k.Namespace, k.ID); err != nil {
			return nil, fmt.Errorf("cancel the ingestion job's files: %w", err)
		}
	}
	return j, nil
}

// SweepJobs deletes the jobs no run saved for keep (30 days), files and all.
func SweepJobs(ctx context.Context, q Querier, keep time.Duration) (int64, error) {
	tag, err := q.Exec(ctx, `DELETE FROM loom.knowledge_jobs WHERE ctid IN (
		SELECT ctid FROM loom.knowledge_jobs WHERE updated_at < now() - $1::interval LIMIT 1000)`, keep.String())
	if err != nil {
		return 0, fmt.Errorf("sweep the expired ingestion jobs: %w", err)
	}
	return tag.RowsAffected(), nil
}
