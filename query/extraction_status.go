package query

import (
	"context"
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/extractqueue"
	"github.com/loomplane/loom/internal/httperr"
)

// memory.extraction_status and memory.extraction_status_mine read the deferred
// extraction requests from the authority (internal/extractqueue), so they see a
// request as soon as it was committed and every change a worker made.

const maxStatusLimit = 500

// extractionList is what a status read answers.
type extractionList struct {
	Requests []extractqueue.View `json:"requests"`
}

type statusQuery struct {
	status, limit string
}

func (q statusQuery) filter(f extractqueue.Filter) (extractqueue.Filter, error) {
	switch q.status {
	case "", extractqueue.StatusPending, extractqueue.StatusRunning, extractqueue.StatusHeld, extractqueue.StatusDone, extractqueue.StatusFailed:
		f.Status = q.status
	default:
		return f, httperr.Validation("status", "status must be pending, running, held, done or failed")
	}
	f.Limit = 100
	if q.limit != "" {
		n, err := strconv.Atoi(q.limit)
		if err != nil || n < 1 || n > maxStatusLimit {
			return f, httperr.Validation("limit", "limit must be between 1 and 500")
		}
		f.Limit = n
	}
	return f, nil
}

// extractionStatus is memory.extraction_status: a namespace's requests, newest first
// (admin tokens).
func (s *Service) extractionStatus(ctx context.Context, p auth.Principal, ns string, q statusQuery) (*extractionList, error) {
	if p.Role != auth.RoleAdmin {
		return nil, httperr.New(http.StatusForbidden, httperr.CodePermissionDenied, "a namespace's extraction status needs an admin token")
	}
	f, err := q.filter(extractqueue.Filter{Org: p.Org, Namespace: ns, UserID: p.ReadUserID})
	if err != nil {
		return nil, err
	}
	return s.readExtractions(ctx, f)
}

// extractionStatusMine is memory.extraction_status_mine: the caller's own requests
// (enqueued with its token, inside its read scope), one by queue_id or the newest.
func (s *Service) extractionStatusMine(ctx context.Context, p auth.Principal, queueID string, q statusQuery) (*extractionList, error) {
	f, err := q.filter(extractqueue.Filter{Org: p.Org, TokenID: p.TokenID, UserID: p.ReadUserID})
	if err != nil {
		return nil, err
	}
	if queueID != "" {
		if _, err := uuid.Parse(queueID); err != nil {
			return nil, httperr.NotFound("no such extraction request")
		}
		f.QueueIDs = []string{queueID}
	}
	list, err := s.readExtractions(ctx, f)
	if err != nil {
		return nil, err
	}
	kept := list.Requests[:0]
	for _, v := range list.Requests {
		if p.Reaches(v.Namespace) {
			kept = append(kept, v)
		}
	}
	list.Requests = kept
	if queueID != "" && len(list.Requests) == 0 {
		return nil, httperr.NotFound("no such extraction request")
	}
	return list, nil
}

func (s *Service) readExtractions(ctx context.Context, f extractqueue.Filter) (*extractionList, error) {
	views, err := extractqueue.List(ctx, s.pool, f)
	if err != nil {
		return nil, httperr.Store("reading the extraction requests", err)
	}
	return &extractionList{Requests: views}, nil
}
