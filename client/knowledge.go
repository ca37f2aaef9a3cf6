package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// The knowledge plane: documents per (namespace, source URI), versioned, and the
// search over their chunks (knowledge.*).

// DocumentInput is one document to write: its text in Content, or any bytes in
// ContentBase64, with ContentType or Name saying its format.
type DocumentInput struct {
	SourceURI     string            `json:"source_uri"`
	Content       *string           `json:"content,omitempty"`
	ContentBase64 string            `json:"content_base64,omitempty"`
	ContentType   string            `json:"content_type,omitempty"`
	Name          string            `json:"name,omitempty"`
	Title         string            `json:"title,omitempty"`
	Tags          []string          `json:"tags,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	// ExpectedVersion is the head version the writer read (0: none); a head that moved
	// answers 409 PRECONDITION_FAILED.
	ExpectedVersion *int64 `json:"expected_version,omitempty"`
	// UserID is the user the document is written for ("": the namespace's); a token
	// bound to a user writes for that user.
	UserID string `json:"user_id,omitempty"`
}

// Text returns a pointer to s, for DocumentInput.Content.
func Text(s string) *string { return &s }

// DocumentWritten is what a knowledge write did to one source.
type DocumentWritten struct {
	SourceURI   string `json:"source_uri"`
	DocID       string `json:"doc_id"`
	Version     int64  `json:"version"`
	VersionText string `json:"version_text"`
	PrevVersion int64  `json:"prev_version"`
	Revision    int64  `json:"revision"`
	Event       string `json:"event"`
	Format      string `json:"format"`
	Deleted     bool   `json:"deleted"`
	ChunkCount  int    `json:"chunk_count"`
	Bytes       int64  `json:"bytes"`
	UserID      string `json:"user_id,omitempty"` // the document's user ("": the namespace's)
	Unchanged   bool   `json:"unchanged,omitempty"`
}

// Document is a source's head (knowledge.get; knowledge.list leaves the content out).
type Document struct {
	SourceURI     string            `json:"source_uri"`
	DocID         string            `json:"doc_id"`
	Version       int64             `json:"version"`
	VersionText   string            `json:"version_text"`
	Revision      int64             `json:"revision"`
	Format        string            `json:"format"`
	Deleted       bool              `json:"deleted"`
	Title         string            `json:"title"`
	ContentType   string            `json:"content_type,omitempty"`
	Tags          []string          `json:"tags"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	Content       *string           `json:"content,omitempty"`
	ContentBase64 string            `json:"content_base64,omitempty"`
	Bytes         int64             `json:"bytes"`
	ChunkCount    int               `json:"chunk_count"`
	UserID        string            `json:"user_id,omitempty"` // the document's user ("": the namespace's)
	CreatedAt     time.Time         `json:"created_at"`
	UpdatedAt     time.Time         `json:"updated_at"`
}

// DocumentList is a page of knowledge.list.
type DocumentList struct {
	Documents []Document `json:"documents"`
	NextAfter string     `json:"next_after,omitempty"`
}

// DocumentListOptions narrow knowledge.list.
type DocumentListOptions struct {
	Prefix, After  string
	Limit          int
	IncludeDeleted bool
	// UserID lists the namespace's documents and this user's only.
	UserID string
}

// KnowledgeSearchRequest is knowledge.search's body.
type KnowledgeSearchRequest struct {
	Query        string   `json:"query"`
	Limit        int      `json:"limit,omitempty"`
	SourcePrefix string   `json:"source_prefix,omitempty"`
	Formats      []string `json:"formats,omitempty"`
	Tags         []string `json:"tags,omitempty"`
	// UpdatedAfter and UpdatedBefore keep the chunks of versions written after and
	// before these times, each excluded.
	UpdatedAfter  *time.Time `json:"updated_after,omitempty"`
	UpdatedBefore *time.Time `json:"updated_before,omitempty"`
	// UserID searches the namespace's documents and this user's only.
	UserID string `json:"user_id,omitempty"`
}

// KnowledgeHit is one chunk knowledge.search answers.
type KnowledgeHit struct {
	SourceURI   string    `json:"source_uri"`
	DocID       string    `json:"doc_id"`
	Version     int64     `json:"version"`
	Ordinal     int       `json:"ordinal"`
	HeadingPath []string  `json:"heading_path,omitempty"`
	Kind        string    `json:"kind"`
	Text        string    `json:"text"`
	Title       string    `json:"title"`
	Format      string    `json:"format"`
	Tags        []string  `json:"tags"`
	UserID      string    `json:"user_id,omitempty"` // the document's user ("": the namespace's)
	UpdatedAt   time.Time `json:"updated_at"`        // when its version was written
	Score       float64   `json:"score"`
	Lexical     float64   `json:"lexical"`
	Vector      float64   `json:"vector"`
}

// KnowledgeSearchAnswer is a page of knowledge.search.
type KnowledgeSearchAnswer struct {
	Hits         []KnowledgeHit `json:"hits"`
	StaleDropped int            `json:"stale_dropped"`
}

// DocumentHeading is one heading of an outline.
type DocumentHeading struct {
	Level int      `json:"level"`
	Title string   `json:"title"`
	Path  []string `json:"path,omitempty"`
}

// DocumentOutline is knowledge.outline's answer.
type DocumentOutline struct {
	SourceURI  string            `json:"source_uri"`
	DocID      string            `json:"doc_id"`
	Version    int64             `json:"version"`
	Title      string            `json:"title"`
	Format     string            `json:"format"`
	Headings   []DocumentHeading `json:"headings"`
	Blocks     int               `json:"blocks"`
	ChunkCount int               `json:"chunk_count"`
}

func knowledgePath(ns, rest string) string { return nsPath(ns) + "/knowledge" + rest }

// AddDocument writes a new version of a source (knowledge.add).
func (c *Client) AddDocument(ctx context.Context, ns string, in DocumentInput) (*DocumentWritten, error) {
	k := c.newCall(http.MethodPost, knowledgePath(ns, ""), nil)
	k.body = in
	var a DocumentWritten
	return &a, c.into(ctx, k, &a)
}

// UpsertDocument writes a new version of a source unless its head holds this content
// already (knowledge.upsert: Unchanged then).
func (c *Client) UpsertDocument(ctx context.Context, ns string, in DocumentInput) (*DocumentWritten, error) {
	k := c.newCall(http.MethodPut, knowledgePath(ns, ""), nil)
	k.body = in
	var a DocumentWritten
	return &a, c.into(ctx, k, &a)
}

// BulkAddDocuments writes documents in one commit (knowledge.bulk_add).
func (c *Client) BulkAddDocuments(ctx context.Context, ns string, docs []DocumentInput) ([]DocumentWritten, error) {
	k := c.newCall(http.MethodPost, knowledgePath(ns, ":bulkAdd"), nil)
	k.body = map[string]any{"documents": docs}
	var a struct {
		Documents []DocumentWritten `json:"documents"`
	}
	return a.Documents, c.into(ctx, k, &a)
}

// DeleteDocument deletes a source (knowledge.delete); expected, when not nil, is the
// head version read.
func (c *Client) DeleteDocument(ctx context.Context, ns, sourceURI string, expected *int64) (*DocumentWritten, error) {
	k := c.newCall(http.MethodDelete, knowledgePath(ns, "/document"), nil)
	k.query = url.Values{"source_uri": {sourceURI}}
	if expected != nil {
		k.query.Set("expected_version", strconv.FormatInt(*expected, 10))
	}
	var a DocumentWritten
	return &a, c.into(ctx, k, &a)
}

// RestoreDocument brings a deleted source back (knowledge.restore).
func (c *Client) RestoreDocument(ctx context.Context, ns, sourceURI string, expected *int64) (*DocumentWritten, error) {
	k := c.newCall(http.MethodPost, knowledgePath(ns, "/document:restore"), nil)
	k.body = struct {
		SourceURI       string `json:"source_uri"`
		ExpectedVersion *int64 `json:"expected_version,omitempty"`
	}{sourceURI, expected}
	var a DocumentWritten
	return &a, c.into(ctx, k, &a)
}

// GetDocument reads a source's head with its content (knowledge.get).
func (c *Client) GetDocument(ctx context.Context, ns, sourceURI string) (*Document, error) {
	k := c.newCall(http.MethodGet, knowledgePath(ns, "/document"), nil)
	k.query = url.Values{"source_uri": {sourceURI}}
	var d Document
	return &d, c.into(ctx, k, &d)
}

// ListDocuments lists a namespace's documents by source URI (knowledge.list).
func (c *Client) ListDocuments(ctx context.Context, ns string, o DocumentListOptions) (*DocumentList, error) {
	k := c.newCall(http.MethodGet, knowledgePath(ns, ""), nil)
	k.query = url.Values{}
	if o.Prefix != "" {
		k.query.Set("prefix", o.Prefix)
	}
	if o.After != "" {
		k.query.Set("after", o.After)
	}
	if o.Limit > 0 {
		k.query.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.IncludeDeleted {
		k.query.Set("include_deleted", "true")
	}
	if o.UserID != "" {
		k.query.Set("user_id", o.UserID)
	}
	var l DocumentList
	return &l, c.into(ctx, k, &l)
}

// SearchKnowledge searches a namespace's document chunks (knowledge.search).
func (c *Client) SearchKnowledge(ctx context.Context, ns string, req KnowledgeSearchRequest) (*KnowledgeSearchAnswer, error) {
	k := c.newCall(http.MethodPost, knowledgePath(ns, ":search"), nil)
	k.body = req
	var a KnowledgeSearchAnswer
	return &a, c.into(ctx, k, &a)
}

// OutlineDocument reads a document's heading structure (knowledge.outline).
func (c *Client) OutlineDocument(ctx context.Context, ns, sourceURI string) (*DocumentOutline, error) {
	k := c.newCall(http.MethodGet, knowledgePath(ns, "/outline"), nil)
	k.query = url.Values{"source_uri": {sourceURI}}
	var o DocumentOutline
	return &o, c.into(ctx, k, &o)
}

// KnowledgeInspection is knowledge.inspect's answer: a namespace's documents by
// format, their chunks, its open ingestion jobs, and how far the answering process's
// chunk index has applied the namespace's revisions.
type KnowledgeInspection struct {
	Documents  int64                  `json:"documents"`
	Deleted    int64                  `json:"deleted"`
	Bytes      int64                  `json:"bytes"`
	Chunks     int64                  `json:"chunks"`
	ByFormat   []KnowledgeFormatCount `json:"by_format"`
	Ingestions struct {
		Pending      int64 `json:"pending"`
		Processing   int64 `json:"processing"`
		FilesPending int64 `json:"files_pending"`
	} `json:"ingestions"`
	Index struct {
		Generation int64 `json:"generation"`
		Position   int64 `json:"position"`
		Behind     int64 `json:"behind"`
	} `json:"index"`
}

// KnowledgeFormatCount is a namespace's documents of one format.
type KnowledgeFormatCount struct {
	Format  string `json:"format"`
	Live    int64  `json:"live"`
	Deleted int64  `json:"deleted"`
	Bytes   int64  `json:"bytes"`
	Chunks  int64  `json:"chunks"`
}

// InspectKnowledge counts a namespace's documents, chunks and owed work (knowledge.inspect).
func (c *Client) InspectKnowledge(ctx context.Context, ns string) (*KnowledgeInspection, error) {
	var in KnowledgeInspection
	return &in, c.into(ctx, c.newCall(http.MethodGet, knowledgePath(ns, "/inspect"), nil), &in)
}

// DatasetSchema is a dataset's columns with their types (int, float, date, string).
type DatasetSchema struct {
	Columns []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"columns"`
}

// DatasetApproval is a dataset's catalog row at a document version.
type DatasetApproval struct {
	SourceURI  string        `json:"source_uri,omitempty"`
	DocVersion int64         `json:"doc_version"`
	DatasetID  string        `json:"dataset_id"`
	Schema     DatasetSchema `json:"schema"`
	ApprovedBy string        `json:"approved_by"`
	ApprovedAt time.Time     `json:"approved_at"`
}

// KnowledgeDatasets is knowledge.dataset_get's answer: the tables of a source's head.
type KnowledgeDatasets struct {
	SourceURI   string `json:"source_uri"`
	DocID       string `json:"doc_id"`
	Version     int64  `json:"version"`
	VersionText string `json:"version_text"`
	Format      string `json:"format"`
	Datasets    []struct {
		DatasetID string           `json:"dataset_id"`
		Name      string           `json:"name"`
		Rows      int              `json:"rows"`
		Schema    DatasetSchema    `json:"schema"`
		Approval  *DatasetApproval `json:"approval"`
	} `json:"datasets"`
}

// DatasetQuery is knowledge.query's grammar (filters, group_by, aggregates, order_by,
// limit), as JSON: see the OpenAPI description.
type DatasetQuery = json.RawMessage

// DatasetResult is knowledge.query's answer.
type DatasetResult struct {
	SourceURI string   `json:"source_uri"`
	DatasetID string   `json:"dataset_id"`
	Version   int64    `json:"version"`
	Columns   []string `json:"columns"`
	Rows      [][]any  `json:"rows"`
	Truncated bool     `json:"truncated"`
}

// GetDatasets reads the tables of a source's head as datasets (knowledge.dataset_get).
func (c *Client) GetDatasets(ctx context.Context, ns, sourceURI string) (*KnowledgeDatasets, error) {
	k := c.newCall(http.MethodGet, knowledgePath(ns, "/datasets"), nil)
	k.query = url.Values{"source_uri": {sourceURI}}
	var d KnowledgeDatasets
	return &d, c.into(ctx, k, &d)
}

// ApproveDataset approves a dataset's schema at the document version reviewed
// (knowledge.dataset_approve); a head that moved past it answers 409.
func (c *Client) ApproveDataset(ctx context.Context, ns, sourceURI, datasetID string, version int64) (*DatasetApproval, error) {
	k := c.newCall(http.MethodPost, knowledgePath(ns, "/datasets:approve"), nil)
	k.body = map[string]any{"source_uri": sourceURI, "dataset_id": datasetID, "version": version}
	var a DatasetApproval
	return &a, c.into(ctx, k, &a)
}

// QueryDataset evaluates q over an approved dataset at the source's head (knowledge.query).
func (c *Client) QueryDataset(ctx context.Context, ns, sourceURI, datasetID string, q DatasetQuery) (*DatasetResult, error) {
	k := c.newCall(http.MethodPost, knowledgePath(ns, "/datasets:query"), nil)
	k.body = map[string]any{"source_uri": sourceURI, "dataset_id": datasetID, "query": q}
	var r DatasetResult
	return &r, c.into(ctx, k, &r)
}

// IngestionJob is what knowledge.ingest and knowledge.ingest_cancel answer.
type IngestionJob struct {
	IngestionID     string `json:"ingestion_id"`
	State           string `json:"state"` // pending, processing, completed, failed, cancelled
	Total           int    `json:"total"`
	Bytes           int64  `json:"bytes,omitempty"`
	CancelRequested bool   `json:"cancel_requested,omitempty"`
}

// IngestionFile is one file of an ingestion job and what its run did with it.
type IngestionFile struct {
	Ordinal      int    `json:"ordinal"`
	SourceURI    string `json:"source_uri"`
	State        string `json:"state"` // pending, written, unchanged, failed, cancelled
	Bytes        int64  `json:"bytes"`
	Version      *int64 `json:"version,omitempty"`
	ChunkCount   int    `json:"chunk_count"`
	ErrorCode    string `json:"error_code,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
}

// IngestionStatus is knowledge.ingest_status's answer.
type IngestionStatus struct {
	IngestionID       string          `json:"ingestion_id"`
	State             string          `json:"state"`
	Total             int             `json:"total"`
	Processed         int             `json:"processed"`
	Written           int             `json:"written"`
	Unchanged         int             `json:"unchanged"`
	Failed            int             `json:"failed"`
	Chunks            int             `json:"chunks"`
	Bytes             int64           `json:"bytes"`
	Runs              int             `json:"runs"`
	CancelRequestedAt *time.Time      `json:"cancel_requested_at,omitempty"`
	CancelledBy       string          `json:"cancelled_by,omitempty"`
	LeaseUntil        *time.Time      `json:"lease_until,omitempty"`
	Actor             string          `json:"actor"`
	UserID            string          `json:"user_id,omitempty"` // the documents' user ("": the namespace's)
	CreatedAt         time.Time       `json:"created_at"`
	UpdatedAt         time.Time       `json:"updated_at"`
	FinishedAt        *time.Time      `json:"finished_at,omitempty"`
	Files             []IngestionFile `json:"files"`
}

// Ended reports whether the job ended (completed, failed or cancelled).
func (s *IngestionStatus) Ended() bool {
	return s.State == "completed" || s.State == "failed" || s.State == "cancelled"
}

// Ingest submits an ingestion job of docs (knowledge.ingest); the workers role writes
// them, each as a knowledge.upsert. Follow it with IngestStatus.
func (c *Client) Ingest(ctx context.Context, ns string, docs []DocumentInput, opts ...CallOption) (*IngestionJob, error) {
	return c.IngestFor(ctx, ns, "", docs, opts...)
}

// IngestFor is Ingest of documents written for userID ("": the namespace's).
func (c *Client) IngestFor(ctx context.Context, ns, userID string, docs []DocumentInput, opts ...CallOption) (*IngestionJob, error) {
	k := c.newCall(http.MethodPost, knowledgePath(ns, "/ingestions"), opts)
	body := map[string]any{"documents": docs}
	if userID != "" {
		body["user_id"] = userID
	}
	k.body = body
	k.write = true
	var a IngestionJob
	return &a, c.into(ctx, k, &a)
}

// IngestStatus reads an ingestion job (knowledge.ingest_status).
func (c *Client) IngestStatus(ctx context.Context, ns, id string) (*IngestionStatus, error) {
	k := c.newCall(http.MethodGet, knowledgePath(ns, "/ingestions/"+url.PathEscape(id)), nil)
	var s IngestionStatus
	return &s, c.into(ctx, k, &s)
}

// CancelIngest asks for an ingestion job's cancel (knowledge.ingest_cancel): a pending
// job ends at once, a running one at its run's next save.
func (c *Client) CancelIngest(ctx context.Context, ns, id string, opts ...CallOption) (*IngestionJob, error) {
	k := c.newCall(http.MethodPost, knowledgePath(ns, "/ingestions/"+url.PathEscape(id)+":cancel"), opts)
	k.write = true
	var a IngestionJob
	return &a, c.into(ctx, k, &a)
}

// KnowledgeCitation is a document chunk an answer cites: k:<doc_id>@<version>#<ordinal>.
type KnowledgeCitation struct {
	Cite      string `json:"cite"`
	SourceURI string `json:"source_uri"`
	DocID     string `json:"doc_id"`
	Version   int64  `json:"version"`
	Ordinal   int    `json:"ordinal"`
}

// Synthesis is knowledge.synthesize's answer.
type Synthesis struct {
	Answer           string              `json:"answer"`
	Abstained        bool                `json:"abstained"`
	AbstainCode      string              `json:"abstain_code,omitempty"`
	Citations        []KnowledgeCitation `json:"citations"`
	CitationsDropped int                 `json:"citations_dropped"`
	StaleDropped     int                 `json:"stale_dropped"`
	PassagesRead     int                 `json:"passages_read"`
	Model            string              `json:"model,omitempty"`
}

// Synthesize answers a question across the namespace's documents, citing the
// passages it used, in one model call (knowledge.synthesize); it abstains when they
// do not answer.
func (c *Client) Synthesize(ctx context.Context, ns string, req KnowledgeSearchRequest) (*Synthesis, error) {
	k := c.newCall(http.MethodPost, knowledgePath(ns, ":synthesize"), nil)
	k.body = req
	var a Synthesis
	return &a, c.into(ctx, k, &a)
}
