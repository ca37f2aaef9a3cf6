package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/knowledge/dataset"
	"github.com/loomplane/loom/knowledge/parse"
	"github.com/loomplane/loom/knowledge/store"
)

// Datasets is knowledge.dataset_get's answer: the tables of a source's head as
// datasets, each with the schema proposed for it and, when the catalog holds one at
// this version, its approval.
type Datasets struct {
	SourceURI string `json:"source_uri"`
	DocID     string `json:"doc_id"`
	Version   int64  `json:"version"`
	// VersionText is Version as a string, for clients whose numbers are float64.
	VersionText string             `json:"version_text"`
	Format      string             `json:"format"`
	Datasets    []DatasetAtVersion `json:"datasets"`
}

// DatasetAtVersion is one dataset of a document version.
type DatasetAtVersion struct {
	dataset.Dataset
	Approval *store.Approval `json:"approval"`
}

// QueryRequest is knowledge.query's body.
type QueryRequest struct {
	SourceURI string          `json:"source_uri"`
	DatasetID string          `json:"dataset_id"`
	Query     json.RawMessage `json:"query"`
}

// QueryAnswer is knowledge.query's answer: the result and the version it was read at.
type QueryAnswer struct {
	SourceURI string `json:"source_uri"`
	DatasetID string `json:"dataset_id"`
	Version   int64  `json:"version"`
	*dataset.Result
}

// tables reads a source's live head and parses its stored body again (as the format
// it was written as) for its tables.
func (s *Service) tables(ctx context.Context, p auth.Principal, ns, uri string) (*store.Head, *parse.Document, error) {
	h, err := s.head(ctx, p, ns, uri, false)
	if err != nil {
		return nil, nil, err
	}
	// DefaultLimits are above every write's, so a stored body always parses again.
	doc, err := parse.Parse(ctx, h.SourceURI, parse.MediaType(h.Format), h.Text.Body, parse.DefaultLimits())
	if err != nil {
		return nil, nil, fmt.Errorf("parse the stored document %q: %w", uri, err)
	}
	return h, doc, nil
}

// datasetGet is knowledge.dataset_get, read from the head (503 POSTGRES_UNAVAILABLE
// when the heads cannot be read).
func (s *Service) datasetGet(ctx context.Context, p auth.Principal, ns, uri string) (*Datasets, error) {
	h, doc, err := s.tables(ctx, p, ns, uri)
	if err != nil {
		return nil, err
	}
	approvals, err := store.Approvals(ctx, s.pool, p.Org, ns, uri, h.Version)
	if err != nil {
		return nil, httperr.Store("reading the dataset catalog", err)
	}
	byID := map[string]*store.Approval{}
	for _, a := range approvals {
		byID[a.DatasetID] = a
	}
	out := &Datasets{SourceURI: h.SourceURI, DocID: h.DocID, Version: h.Version, VersionText: strconv.FormatInt(h.Version, 10),
		Format: h.Format, Datasets: []DatasetAtVersion{}}
	for _, d := range dataset.Of(doc) {
		out.Datasets = append(out.Datasets, DatasetAtVersion{Dataset: d, Approval: byID[d.ID]})
	}
	return out, nil
}

// query is knowledge.query: the query evaluated over the dataset's table at the
// source's head, under the schema approved at that version. A dataset with no
// approval at the head's version (never approved, or approved at a version the head
// has moved past) answers 409 PRECONDITION_FAILED.
func (s *Service) query(ctx context.Context, p auth.Principal, ns string, req *QueryRequest) (*QueryAnswer, error) {
	switch {
	case req.SourceURI == "":
		return nil, httperr.Validation("source_uri", "source_uri is required")
	case req.DatasetID == "":
		return nil, httperr.Validation("dataset_id", "dataset_id is required")
	case len(req.Query) == 0:
		return nil, httperr.Validation("query", "query is required (knowledge.query's grammar: filters, group_by, aggregates, order_by, limit)")
	}
	q, err := dataset.ParseQuery(req.Query)
	if err != nil {
		return nil, queryRefused(err)
	}
	h, doc, err := s.tables(ctx, p, ns, req.SourceURI)
	if err != nil {
		return nil, err
	}
	approvals, err := store.Approvals(ctx, s.pool, p.Org, ns, req.SourceURI, h.Version)
	if err != nil {
		return nil, httperr.Store("reading the dataset catalog", err)
	}
	var schema *dataset.Schema
	for _, a := range approvals {
		if a.DatasetID == req.DatasetID {
			schema = &dataset.Schema{}
			if err := json.Unmarshal(a.Schema, schema); err != nil {
				return nil, fmt.Errorf("decode the approved schema of %s: %w", a.DatasetID, err)
			}
		}
	}
	t, ok := dataset.Find(doc, req.DatasetID)
	switch {
	case !ok:
		return nil, (&httperr.Error{Status: http.StatusNotFound, Code: httperr.CodeNotFound,
			Message: fmt.Sprintf("version %d of %q has no dataset %q", h.Version, h.SourceURI, req.DatasetID)}).
			With("source_uri", h.SourceURI).With("dataset_id", req.DatasetID)
	case schema == nil:
		return nil, (&httperr.Error{Status: http.StatusConflict, Code: httperr.CodePreconditionFailed,
			Message: fmt.Sprintf("dataset %q of %q is not approved at the head's version %d; approve it (knowledge.dataset_approve) first",
				req.DatasetID, h.SourceURI, h.Version)}).
			With("source_uri", h.SourceURI).With("dataset_id", req.DatasetID).With("head_version", h.Version)
	}
	res, err := dataset.Evaluate(ctx, t, *schema, q, dataset.DefaultLimits())
	if err != nil {
		return nil, queryRefused(err)
	}
	return &QueryAnswer{SourceURI: h.SourceURI, DatasetID: req.DatasetID, Version: h.Version, Result: res}, nil
}

// queryRefused is a query the grammar refuses: 422 naming the field, under query.
func queryRefused(err error) error {
	var qe *dataset.QueryError
	if errors.As(err, &qe) {
		return httperr.Validation("query."+qe.Field, qe.Message)
	}
	return err
}
