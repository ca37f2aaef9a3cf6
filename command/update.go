package command

import (
	"context"

	"github.com/google/uuid"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/route"
)

// idWrite is a write of the key a memory id names: memory.update_by_id.
type idWrite struct {
	origin
	memoryID uuid.UUID
	body     *setRequest
}

// update is memory.update: it revises an existing row in place (the key keeps its
// memory id); fields the request leaves out, the value included, keep the head's. A
// changed value meets every rule memory.set's does.
func (s *Service) update(ctx context.Context, p auth.Principal, r keyWrite) (*setAnswer, error) {
	id, other, err := route.WriteIdentity(p, r.namespace, r.key, r.body.names())
	if err != nil {
		return nil, err
	}
	if other {
		return nil, otherUserNotFound("memory")
	}
	return s.runUpdate(ctx, "memory.update", p, id, r.origin, r.body)
}

// updateByID is memory.update_by_id: the id names the one live head the caller
// reaches; an id it cannot reach, or that more than one reachable head holds, is not
// found, never forbidden.
func (s *Service) updateByID(ctx context.Context, p auth.Principal, r idWrite) (*setAnswer, error) {
	if r.body.Agent != "" || r.body.UserID != "" || r.body.SessionID != "" {
		return nil, httperr.Validation("body", "an update by id takes its identity from the id")
	}
	head, err := s.headByID(ctx, p, r.memoryID)
	if err != nil {
		return nil, err
	}
	return s.runUpdate(ctx, "memory.update_by_id", p, head.Identity, r.origin, r.body)
}

func (s *Service) runUpdate(ctx context.Context, op string, p auth.Principal, id memrow.Identity, o origin, req *setRequest) (*setAnswer, error) {
	if req.Proposed {
		return nil, httperr.Validation("proposed", "an update revises an established row; write a proposal with memory.set")
	}
	if err := route.RefuseShared(id.UserID); err != nil {
		return nil, err // a shared row, named by its id
	}
	w, err := newSetWrite(op, p, id, req, o.requestID)
	if err != nil {
		return nil, err
	}
	w.requireHead, w.valueFromHead, w.keepGraph, w.hold = true, len(req.Value) == 0, true, o.hold
	return s.runSet(ctx, w)
}

// headByID resolves an org-wide memory id to the one live head the caller acts on
// (heads.OneByID): not found when the caller reaches copies in several namespaces, or
// its read scope hides one.
func (s *Service) headByID(ctx context.Context, p auth.Principal, memoryID uuid.UUID) (*memrow.Row, error) {
	withID, err := heads.WithID(ctx, s.pool, p.Org, memoryID.String())
	if err != nil {
		return nil, httperr.Store("reading heads by id", err)
	}
	head := heads.OneByID(withID, s.now(), p.Reaches, p.ReadUserID)
	if head != nil && !p.InSession(head.SessionID) {
		head = nil
	}
	if head == nil {
		return nil, httperr.NotFound("memory not found")
	}
	return head, nil
}
