package query

import (
	"context"
	"strconv"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/learnings"
	"github.com/loomplane/loom/internal/memrow"
)

// learnings.list (GET /v1/namespaces/{ns}/learnings) reads the learnings queue
// (internal/learnings): the rules about the agent itself that memory.set_from_messages
// filed instead of memories, newest first, each with the users' quotes that support
// it, from the authority. It needs a token that writes (admin or writer): the queue is
// the bot's, for whoever reviews its rules. A token bound to one user sees only the
// rules that user supports, each with that user's quotes alone.

// maxLearnings is the most candidates one call lists.
const maxLearnings = 500

// learningsCall is a learnings.list of a namespace.
type learningsCall struct {
	namespace, agent, limit string
}

// learningsAnswer is learnings.list's answer.
type learningsAnswer struct {
	Namespace string             `json:"namespace"`
	Learnings []learnings.Opened `json:"learnings"`
}

// listLearnings is learnings.list.
func (s *Service) listLearnings(ctx context.Context, p auth.Principal, c learningsCall) (*learningsAnswer, error) {
	if err := p.Namespace(c.namespace); err != nil {
		return nil, err
	}
	if err := p.RequireWrite(); err != nil {
		return nil, err
	}
	if c.agent != "" {
		if err := memrow.ValidateIdentity("agent", c.agent); err != nil {
			return nil, err
		}
	}
	limit := 100
	if c.limit != "" {
		n, err := strconv.Atoi(c.limit)
		if err != nil || n < 1 || n > maxLearnings {
			return nil, httperr.Validation("limit", "limit must be between 1 and 500")
		}
		limit = n
	}
	out, err := learnings.List(ctx, s.pool, p.Org, c.namespace, c.agent, p.ReadUserID, limit)
	if err != nil {
		return nil, httperr.Store("reading the learnings queue", err)
	}
	return &learningsAnswer{Namespace: c.namespace, Learnings: out}, nil
}
