package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/idempotency"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/rowseal"
	"github.com/loomplane/loom/knowledge/parse"
	"github.com/loomplane/loom/knowledge/store"
)

// Limits of knowledge.ingest: how many files a job takes and how many bytes in all.
// The request itself is bounded by LOOM_HTTP_BODY_LIMIT_BYTES first.
const (
	MaxIngestFiles = 1000
	MaxIngestBytes = 256 << 20
)

// IngestRequest is knowledge.ingest's JSON body: the documents, each as a write takes
// it (content as text, or any bytes in content_base64).
type IngestRequest struct {
	Documents []DocumentInput `json:"documents"`
	// UserID is the user the job's documents are written for (absent: the
	// namespace's); a token bound to a user writes for that user (user.go).
	UserID string `json:"user_id,omitempty"`
}

// IngestAnswer is what knowledge.ingest and knowledge.ingest_cancel answer: the job
// as it stands.
type IngestAnswer struct {
	IngestionID string `json:"ingestion_id"`
	State       string `json:"state"`
	Total       int    `json:"total"`
	Bytes       int64  `json:"bytes,omitempty"` // the documents' bytes in all (knowledge.ingest)
	// CancelRequested says a cancel was asked for: a running job ends at its run's
	// next save, with nothing more written.
	CancelRequested bool `json:"cancel_requested,omitempty"`
}

// jobFile is what a job keeps of a file until its run writes it, sealed under the
// job's key: the document's description and its bytes.
type jobFile struct {
	Name        string            `json:"name,omitempty"`
	ContentType string            `json:"content_type,omitempty"`
	Title       string            `json:"title,omitempty"`
	Tags        []string          `json:"tags,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	Body        []byte            `json:"body"`
}

// ingest is knowledge.ingest: it checks every document as a bulk add would (a source
// named twice, a URI Postgres cannot key, a format Loom does not read, a file over the
// limit: refused before anything is written), then commits the job with its files
// sealed under the job's data key, and wakes the ingest workers. The documents are
// parsed, embedded and committed by the workers role (workers/knowledge_ingest.go),
// a batch at a time, each as a knowledge.upsert.
func (s *Service) ingest(ctx context.Context, p auth.Principal, ns string, req *IngestRequest, hold *idempotency.Hold) (*IngestAnswer, error) {
	if err := mayWrite(p); err != nil {
		return nil, err
	}
	switch {
	case len(req.Documents) == 0:
		return nil, httperr.Validation("documents", "documents must hold at least one document")
	case len(req.Documents) > MaxIngestFiles:
		return nil, httperr.Validation("documents", fmt.Sprintf("at most %d documents a job", MaxIngestFiles))
	}
	user, err := documentUser(p, "user_id", req.UserID)
	if err != nil {
		return nil, err
	}
	seen := map[string]int{}
	key, err := events.NewDataKey()
	if err != nil {
		return nil, err
	}
	files := make([]store.NewFile, len(req.Documents))
	var total int64
	for i := range req.Documents {
		in := &req.Documents[i]
		field := fmt.Sprintf("documents[%d].", i)
		if err := checkJobDocument(field, in); err != nil {
			return nil, err
		}
		if j, dup := seen[in.SourceURI]; dup {
			return nil, httperr.Validation(field+"source_uri",
				fmt.Sprintf("source %q is named twice (documents[%d] and [%d]): a job writes a source once", in.SourceURI, j, i))
		}
		seen[in.SourceURI] = i
		body, err := in.body(field)
		if err != nil {
			return nil, err
		}
		if len(body) > MaxDocumentBytes {
			return nil, parseRefusal(field+"content", &parse.ParseError{Code: CodeTooLarge,
				Message: fmt.Sprintf("%q is %d bytes, over the limit of %d", in.SourceURI, len(body), MaxDocumentBytes)})
		}
		name := in.Name
		if name == "" {
			name = in.SourceURI
		}
		if parse.DetectFormat(name, in.contentType(), body) == "" {
			return nil, parseRefusal(field+"content", &parse.ParseError{Code: CodeUnsupportedFormat,
				Message: fmt.Sprintf("%q is in no format Loom reads (text, Markdown, HTML, PDF, CSV, XLSX); name it by its extension or content_type", in.SourceURI)})
		}
		if total += int64(len(body)); total > MaxIngestBytes {
			return nil, parseRefusal("documents", &parse.ParseError{Code: CodeTooLarge,
				Message: fmt.Sprintf("the job's documents are over %d bytes in all", MaxIngestBytes)})
		}
		plain, err := json.Marshal(jobFile{Name: in.Name, ContentType: in.contentType(), Title: in.Title, Tags: in.Tags, Metadata: in.Metadata, Body: body})
		if err != nil {
			return nil, err
		}
		sealed, err := rowseal.Seal(key, store.LabelIngest, plain)
		if err != nil {
			return nil, err
		}
		files[i] = store.NewFile{SourceURI: in.SourceURI, Bytes: int64(len(body)), Sealed: sealed}
	}
	wrapped := key
	if s.keys != nil {
		if wrapped, err = s.keys.Wrap(key); err != nil {
			return nil, fmt.Errorf("wrap the job's key: %w", err)
		}
	}
	if user != "" {
		if _, err := s.refs.Key(ctx, p.Org); err != nil {
			return nil, httperr.Store("reading the org's user reference key", err)
		}
	}
	ans := &IngestAnswer{IngestionID: uuid.NewString(), State: store.JobPending, Total: len(files), Bytes: total}
	err = pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		gen, err := generations.Read(ctx, tx, p.Org, ns)
		if err != nil {
			return fmt.Errorf("read the namespace's generation: %w", err)
		}
		if err := store.InsertJob(ctx, tx, store.JobKey{Org: p.Org, Namespace: ns, ID: ans.IngestionID}, gen, p.Actor(), user, wrapped, files); err != nil {
			return err
		}
		return idempotency.MarkDone(ctx, tx, hold, ans)
	})
	if errors.Is(err, idempotency.ErrTakenOver) {
		return nil, idempotency.TakenOver(err)
	}
	if err != nil {
		return nil, httperr.Store("committing the ingestion job", err)
	}
	s.wakeIngest()
	return ans, nil
}

// checkJobDocument refuses what a job's document may not say: a source URI Postgres
// cannot key, too many tags, an expected version (a job writes over the head it
// finds), a user of its own (a job's documents are its user's).
func checkJobDocument(field string, in *DocumentInput) error {
	if err := checkSourceURI(field+"source_uri", in.SourceURI); err != nil {
		return err
	}
	switch {
	case len(in.Tags) > MaxTags:
		return httperr.Validation(field+"tags", fmt.Sprintf("at most %d tags", MaxTags))
	case in.ExpectedVersion != nil:
		return httperr.Validation(field+"expected_version", "an ingestion writes each source over its head as it finds it: expected_version is not taken")
	case in.UserID != "" && in.UserID != memrow.DefaultIdentity:
		return httperr.Validation(field+"user_id", "a job's documents are written for one user: give user_id on the request, not on a document")
	}
	return nil
}

// ingestCancel is knowledge.ingest_cancel: a pending job ends cancelled at once; a
// running one at its run's next save, which writes nothing more. An ended job is
// answered as it is.
func (s *Service) ingestCancel(ctx context.Context, p auth.Principal, ns, id string, hold *idempotency.Hold) (*IngestAnswer, error) {
	if err := mayWrite(p); err != nil {
		return nil, err
	}
	if err := CheckIngestionID(id); err != nil {
		return nil, err
	}
	// Another user's job is absent to a token bound to a user.
	if p.ReadUserID != "" {
		j, err := store.ReadJob(ctx, s.pool, store.JobKey{Org: p.Org, Namespace: ns, ID: id})
		switch {
		case errors.Is(err, store.ErrNoJob) || (err == nil && !sees(p, j.UserID)):
			return nil, noJob(id)
		case err != nil:
			return nil, httperr.Store("reading the ingestion job", err)
		}
	}
	var ans *IngestAnswer
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		j, err := store.CancelJob(ctx, tx, store.JobKey{Org: p.Org, Namespace: ns, ID: id}, p.Actor())
		if err != nil {
			return err
		}
		ans = &IngestAnswer{IngestionID: j.ID, State: j.State, Total: j.Total, CancelRequested: j.CancelRequestedAt != nil}
		return idempotency.MarkDone(ctx, tx, hold, ans)
	})
	switch {
	case errors.Is(err, store.ErrNoJob):
		return nil, noJob(id)
	case errors.Is(err, idempotency.ErrTakenOver):
		return nil, idempotency.TakenOver(err)
	case err != nil:
		return nil, httperr.Store("cancelling the ingestion job", err)
	}
	return ans, nil
}

// CheckIngestionID refuses an ingestion id that is not a UUID (422).
func CheckIngestionID(id string) error {
	if _, err := uuid.Parse(id); err != nil {
		return httperr.Validation("ingestion_id", "ingestion_id is the UUID knowledge.ingest answered")
	}
	return nil
}

func noJob(id string) *httperr.Error {
	return (&httperr.Error{Status: http.StatusNotFound, Code: httperr.CodeNotFound,
		Message: "no ingestion job " + id + " in this namespace"}).With("ingestion_id", id)
}

// wakeIngest wakes this process's ingest workers; the others find the job at their
// next poll.
func (s *Service) wakeIngest() {
	select {
	case s.ingestWake <- struct{}{}:
	default:
	}
}

// IngestWake is what wakes this process's ingest workers when a job is submitted.
func (s *Service) IngestWake() <-chan struct{} { return s.ingestWake }
