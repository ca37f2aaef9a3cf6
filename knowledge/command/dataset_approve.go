package command

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/knowledge/dataset"
	"github.com/loomplane/loom/knowledge/parse"
	"github.com/loomplane/loom/knowledge/store"
)

// ApproveRequest is knowledge.dataset_approve's body: the dataset, and the document
// version its approver reviewed (as knowledge.dataset_get answered it).
type ApproveRequest struct {
	SourceURI string `json:"source_uri"`
	DatasetID string `json:"dataset_id"`
	Version   int64  `json:"version"`
}

// Approved is knowledge.dataset_approve's answer: the catalog row.
type Approved struct {
	SourceURI string `json:"source_uri"`
	*store.Approval
}

// approveDataset is knowledge.dataset_approve: in one transaction holding the source's
// head (FOR SHARE, so a commit that would move it and an erasure that would delete it
// wait), the catalog row of the dataset at the reviewed version, with the schema
// dataset.Infer proposes for its table there. A head that moved past the reviewed
// version (a later version, or that version deleted) answers 409 PRECONDITION_FAILED,
// as does a document an erasure removed; nothing is written then.
func (s *Service) approveDataset(ctx context.Context, p auth.Principal, ns string, req *ApproveRequest) (*Approved, error) {
	if err := mayWrite(p); err != nil {
		return nil, err
	}
	switch {
	case req.SourceURI == "":
		return nil, httperr.Validation("source_uri", "source_uri is required")
	case req.DatasetID == "":
		return nil, httperr.Validation("dataset_id", "dataset_id is required")
	case req.Version <= 0:
		return nil, httperr.Validation("version", "version is the document version reviewed (knowledge.dataset_get's version)")
	}
	var out *Approved
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		h, err := store.ShareHead(ctx, tx, p.Org, ns, req.SourceURI)
		if errors.Is(err, store.ErrNoHead) {
			erased, err := store.Erased(ctx, tx, p.Org, ns, req.SourceURI, req.Version, "")
			if err != nil {
				return err
			}
			if erased {
				return approvalRefused(req, "an erasure removed that document")
			}
			return notFound(req.SourceURI, "has no document")
		}
		if err != nil {
			return err
		}
		switch {
		case !sees(p, h.UserID):
			// Another user's document is absent to a token bound to a user.
			return notFound(req.SourceURI, "has no document")
		case h.Deleted:
			return approvalRefused(req, "the document was deleted")
		case h.Version != req.Version:
			return approvalRefused(req, fmt.Sprintf("the head is at version %d", h.Version)).With("head_version", h.Version)
		}
		doc, err := parse.Parse(ctx, h.SourceURI, parse.MediaType(h.Format), h.Text.Body, s.limits)
		if err != nil {
			return fmt.Errorf("parse the stored document %q: %w", h.SourceURI, err)
		}
		t, ok := dataset.Find(doc, req.DatasetID)
		if !ok {
			return (&httperr.Error{Status: http.StatusNotFound, Code: httperr.CodeNotFound,
				Message: fmt.Sprintf("version %d of %q has no dataset %q", h.Version, h.SourceURI, req.DatasetID)}).
				With("source_uri", h.SourceURI).With("dataset_id", req.DatasetID)
		}
		a, err := store.Approve(ctx, tx, h, req.DatasetID, dataset.Infer(t), p.Actor())
		if err != nil {
			return err
		}
		out = &Approved{SourceURI: h.SourceURI, Approval: a}
		return nil
	})
	if err != nil {
		var he *httperr.Error
		if errors.As(err, &he) {
			return nil, he
		}
		return nil, httperr.Store("approving the dataset", err)
	}
	return out, nil
}

// approvalRefused is an approval whose reviewed version is no longer the head's.
func approvalRefused(req *ApproveRequest, why string) *httperr.Error {
	return (&httperr.Error{Status: http.StatusConflict, Code: httperr.CodePreconditionFailed,
		Message: fmt.Sprintf("version %d of %q can no longer be approved: %s; review the dataset again", req.Version, req.SourceURI, why)}).
		With("source_uri", req.SourceURI).With("dataset_id", req.DatasetID)
}
