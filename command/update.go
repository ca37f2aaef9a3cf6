package command

import (
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// handleUpdate is memory.update: it revises an existing row in place (the key keeps
// its memory id); fields the request leaves out, the value included, keep the head's.
// A changed value meets every phase memory.set runs.
func (s *Service) handleUpdate(c *fiber.Ctx) error {
	return s.measured(c, "memory.update", func(hold *idemHold) (any, error) {
		p, ns, err := routeNamespace(c, mayWrite)
		if err != nil {
			return nil, err
		}
		key, err := routeKey(c)
		if err != nil {
			return nil, err
		}
		req, err := decodeSet(c.Body())
		if err != nil {
			return nil, err
		}
		id := memrow.Identity{Org: p.Org, Namespace: ns, Agent: orDash(req.Agent), UserID: orDash(req.UserID),
			SessionID: orDash(req.SessionID), MemoryKey: key}
		if p.ReadUserID != "" {
			if req.UserID != "" && req.UserID != p.ReadUserID {
				return nil, otherUser()
			}
			id.UserID = p.ReadUserID
		}
		return s.runUpdate(c, hold, "memory.update", p, id, req)
	})
}

// handleUpdateByID is memory.update_by_id: the id names the one live head the caller
// reaches; an id it cannot reach, or that more than one reachable head holds, is not
// found, never forbidden.
func (s *Service) handleUpdateByID(c *fiber.Ctx) error {
	return s.measured(c, "memory.update_by_id", func(hold *idemHold) (any, error) {
		p := auth.From(c)
		if err := p.RequireWrite(); err != nil {
			return nil, err
		}
		memoryID, err := uuid.Parse(c.Params("id"))
		if err != nil {
			return nil, httperr.NotFound("memory not found")
		}
		req, err := decodeSet(c.Body())
		if err != nil {
			return nil, err
		}
		if req.Agent != "" || req.UserID != "" || req.SessionID != "" {
			return nil, httperr.Validation("body", "an update by id takes its identity from the id")
		}
		head, err := s.headByID(c, p, memoryID)
		if err != nil {
			return nil, err
		}
		return s.runUpdate(c, hold, "memory.update_by_id", p, head.Identity, req)
	})
}

func (s *Service) runUpdate(c *fiber.Ctx, hold *idemHold, op string, p auth.Principal, id memrow.Identity, req *setRequest) (any, error) {
	if req.Proposed {
		return nil, httperr.Validation("proposed", "an update revises an established row; write a proposal with memory.set")
	}
	w, err := newSetWrite(op, p, id, req, c.Get("X-Request-Id"))
	if err != nil {
		return nil, err
	}
	w.requireHead, w.valueFromHead, w.keepGraph, w.hold = true, len(req.Value) == 0, true, hold
	return s.runSet(c.UserContext(), w)
}

// overHead fits an update to the head a round read: it needs a live head (404), and
// one that sends no value keeps the head's.
func (w *setWrite) overHead(head *memrow.Row, now time.Time) error {
	if w.requireHead && (head == nil || !head.Live(now)) {
		return httperr.NotFound("memory not found")
	}
	if w.valueFromHead && (w.value == nil || w.sha != head.ContentSHA256) {
		w.setValue(head.Value)
	}
	return nil
}

// headByID resolves an org-wide memory id to the one live head the caller reaches.
func (s *Service) headByID(c *fiber.Ctx, p auth.Principal, memoryID uuid.UUID) (*memrow.Row, error) {
	rows, err := s.pool.Query(c.UserContext(), `SELECT row FROM loom.memory_current WHERE org = $1 AND memory_id = $2`, p.Org, memoryID)
	if err != nil {
		return nil, httperr.Store("reading heads by id", err)
	}
	all, err := heads.Collect(rows)
	if err != nil {
		return nil, httperr.Store("reading heads by id", err)
	}
	now := s.now()
	var found []*memrow.Row
	for _, h := range all {
		if h.Live(now) && p.Reaches(h.Namespace) && (p.ReadUserID == "" || h.UserID == p.ReadUserID) {
			found = append(found, h)
		}
	}
	if len(found) != 1 {
		return nil, httperr.New(http.StatusNotFound, httperr.CodeNotFound, "memory not found")
	}
	return found[0], nil
}
