package query

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/knowledge/store"
)

// IngestStatus is knowledge.ingest_status's answer: a job's state, its progress and
// each file's outcome, read from Postgres (the job's authority).
type IngestStatus struct {
	IngestionID string `json:"ingestion_id"`
	State       string `json:"state"`
	// Total files; Processed of them so far: Written (a new version committed),
	// Unchanged (the head held that content already) and Failed (the parser refused
	// it: each failed file names its code).
	Total     int   `json:"total"`
	Processed int   `json:"processed"`
	Written   int   `json:"written"`
	Unchanged int   `json:"unchanged"`
	Failed    int   `json:"failed"`
	Chunks    int   `json:"chunks"`
	Bytes     int64 `json:"bytes"`
	// Runs counts the runs that took the job: more than one when a run's lease lapsed
	// and another took it over.
	Runs              int             `json:"runs"`
	CancelRequestedAt *time.Time      `json:"cancel_requested_at,omitempty"`
	CancelledBy       string          `json:"cancelled_by,omitempty"`
	LeaseUntil        *time.Time      `json:"lease_until,omitempty"`
	Actor             string          `json:"actor"`
	UserID            string          `json:"user_id,omitempty"` // the documents' user (absent: the namespace's)
	CreatedAt         time.Time       `json:"created_at"`
	UpdatedAt         time.Time       `json:"updated_at"`
	FinishedAt        *time.Time      `json:"finished_at,omitempty"`
	Files             []store.JobFile `json:"files"`
}

// ingestStatus is knowledge.ingest_status.
func (s *Service) ingestStatus(ctx context.Context, p auth.Principal, ns, id string) (*IngestStatus, error) {
	if _, err := uuid.Parse(id); err != nil {
		return nil, httperr.Validation("ingestion_id", "ingestion_id is the UUID knowledge.ingest answered")
	}
	k := store.JobKey{Org: p.Org, Namespace: ns, ID: id}
	j, err := store.ReadJob(ctx, s.pool, k)
	if errors.Is(err, store.ErrNoJob) || (err == nil && !readUsers(p, "").Sees(j.UserID)) {
		return nil, (&httperr.Error{Status: http.StatusNotFound, Code: httperr.CodeNotFound,
			Message: "no ingestion job " + id + " in this namespace"}).With("ingestion_id", id)
	}
	if err != nil {
		return nil, httperr.Store("reading the ingestion job", err)
	}
	files, err := store.ReadJobFiles(ctx, s.pool, k)
	if err != nil {
		return nil, httperr.Store("reading the ingestion job's files", err)
	}
	return &IngestStatus{IngestionID: j.ID, State: j.State, Total: j.Total, Processed: j.Processed, Written: j.Written,
		Unchanged: j.Unchanged, Failed: j.Failed, Chunks: j.Chunks, Bytes: j.Bytes, Runs: j.Runs,
		CancelRequestedAt: j.CancelRequestedAt, CancelledBy: j.CancelledBy, LeaseUntil: j.LeaseUntil, Actor: j.Actor, UserID: j.UserID,
		CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt, FinishedAt: j.FinishedAt, Files: files}, nil
}
