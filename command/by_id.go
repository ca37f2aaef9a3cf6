package command

import (
	"context"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/route"
)

// The by-id forms of memory.verify and memory.redact (POST /v1/memories/{id}:verify,
// POST /v1/memories/{id}:redact), addressed by the org-wide memory id as
// memory.update_by_id is (memory-architecture, Invariants: "memory.verify (by id)
// resolve[s] the id's namespace ... before the read; memory.redact checks ... after
// it"). The id resolves to the one live head the token reaches (headByID): a row it
// cannot reach answers 404, never 403. Then each runs as its key form does.

// idHandler handles one custom method of POST /v1/memories/{id}:{method}.
type idHandler func(s *Service, c *fiber.Ctx, memoryID uuid.UUID) error

// idMethods are the custom methods of POST /v1/memories/{id}:{method}.
var idMethods = map[string]idHandler{
	"verify": (*Service).handleVerifyByID,
	"redact": (*Service).handleRedactByID,
}

func (s *Service) handleIDMethod(c *fiber.Ctx) error {
	raw, method, err := splitMethod(c.Params("id"))
	if err != nil {
		return err
	}
	h, ok := idMethods[method]
	if !ok {
		return httperr.NotFound("unknown method :" + method)
	}
	memoryID, err := uuid.Parse(raw)
	if err != nil {
		return httperr.NotFound("memory not found")
	}
	return h(s, c, memoryID)
}

// keyOf is the route names of a head's key: the identity a key form would name.
func keyOf(h *memrow.Row) route.Names {
	return route.Names{Agent: h.Agent, UserID: h.UserID, SessionID: h.SessionID}
}

func (s *Service) handleVerifyByID(c *fiber.Ctx, memoryID uuid.UUID) error {
	return s.measured(c, "memory.verify", func(ctx context.Context, o origin) (any, error) {
		p := auth.From(c)
		if err := p.RequireWrite(); err != nil {
			return nil, err
		}
		head, err := s.headByID(ctx, p, memoryID)
		if err != nil {
			return nil, err
		}
		return s.runCopy(ctx, p, copyCall{origin: o, namespace: head.Namespace, key: head.MemoryKey, names: keyOf(head),
			version: -1, op: keyMethods["verify"]})
	})
}

func (s *Service) handleRedactByID(c *fiber.Ctx, memoryID uuid.UUID) error {
	var body redactBody
	if err := httperr.DecodeBody(c.Body(), &body); err != nil {
		return err
	}
	if body.Agent != "" || body.UserID != "" || body.SessionID != "" {
		return httperr.Validation("body", "a redact by id takes its identity from the id")
	}
	if body.Version == 0 {
		return httperr.Validation("version", "version is required")
	}
	return s.measured(c, "memory.redact", func(ctx context.Context, o origin) (any, error) {
		p := auth.From(c)
		if err := p.RequireWrite(); err != nil {
			return nil, err
		}
		head, err := s.headByID(ctx, p, memoryID)
		if err != nil {
			return nil, err
		}
		return s.redact(ctx, p, redactCall{requestID: o.requestID, namespace: head.Namespace, key: head.MemoryKey,
			names: keyOf(head), version: int64(body.Version)})
	})
}
