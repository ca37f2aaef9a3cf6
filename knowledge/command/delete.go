package command

import (
	"context"
	"net/http"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/idempotency"
)

// HeadRequest names a source and, optionally, the head version its writer read.
type HeadRequest struct {
	SourceURI       string `json:"source_uri"`
	ExpectedVersion *int64 `json:"expected_version,omitempty"`
}

// delete is knowledge.delete: a new version of the source marked deleted, keeping its
// content for a restore; its chunks leave search.
func (s *Service) delete(ctx context.Context, p auth.Principal, ns string, req HeadRequest, hold *idempotency.Hold) (*Written, error) {
	return s.flip(ctx, p, ns, req, "knowledge.delete", events.TypeDocumentDeleted, hold)
}

// restore is knowledge.restore: a deleted source comes back with the content and the
// chunks it had.
func (s *Service) restore(ctx context.Context, p auth.Principal, ns string, req HeadRequest, hold *idempotency.Hold) (*Written, error) {
	return s.flip(ctx, p, ns, req, "knowledge.restore", events.TypeDocumentRestored, hold)
}

func (s *Service) flip(ctx context.Context, p auth.Principal, ns string, req HeadRequest, op string, event events.Type, hold *idempotency.Hold) (*Written, error) {
	if err := mayWrite(p); err != nil {
		return nil, err
	}
	if err := checkSourceURI("source_uri", req.SourceURI); err != nil {
		return nil, err
	}
	head, err := s.readHead(ctx, p.Org, ns, req.SourceURI)
	if err != nil {
		return nil, err
	}
	deleting := event == events.TypeDocumentDeleted
	switch {
	case head == nil || !sees(p, head.UserID):
		// Another user's document is absent to a token bound to a user.
		return nil, notFound(req.SourceURI, "has no document")
	case deleting && head.Deleted:
		return nil, notFound(req.SourceURI, "is deleted already")
	case !deleting && !head.Deleted:
		return nil, (&httperr.Error{Status: http.StatusConflict, Code: httperr.CodePreconditionFailed,
			Message: "the document is not deleted: there is nothing to restore"}).With("source_uri", req.SourceURI)
	}
	read := head.Version
	if req.ExpectedVersion != nil {
		read = *req.ExpectedVersion
	}
	w, err := s.commitWith(ctx, p, ns, []*plan{{op: op, event: event, uri: req.SourceURI, user: head.UserID, read: read, from: head}},
		guardOf(hold, func(w []Written) any { return &w[0] }))
	if err != nil {
		return nil, err
	}
	return &w[0], nil
}
