package command

import (
	"context"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/route"
)

// memory.touch (POST /v1/namespaces/{ns}/memories/{key}:touch) records that a caller
// used a memory: one touch in loom.memory_touches, nothing committed. The command role
// publishes the touches in the namespace's memory.usage_recorded record
// (usage_publish.go), and the usage_fold pass (workers/usage_fold.go), a consumer of
// the topic, folds them into the row's reinforcement_count,
// which search's prior reads (docs/architecture.md, "Background passes"), through the one commit as an
// amendment of the head (its version kept, so the caller's preconditions hold). The
// answer does not wait for the fold.

const opTouch = "memory.touch"

// touchAnswer is memory.touch's answer.
type touchAnswer struct {
	MemoryID  string `json:"memory_id"`
	MemoryKey string `json:"memory_key"`
	Touched   bool   `json:"touched"`
}

// touch records a touch of the live head the route names.
func (s *Service) touch(ctx context.Context, p auth.Principal, ns, key string, names route.Names) (*touchAnswer, error) {
	id, err := keyIdentity(p, ns, key, names)
	if err != nil {
		return nil, err
	}
	if err := s.refuseDeletedNamespace(ctx, p.Org, ns); err != nil {
		return nil, err
	}
	head, err := heads.Read(ctx, s.pool, id)
	if err != nil {
		return nil, httperr.Store("reading the head", err)
	}
	if head == nil || (p.ReadUserID != "" && head.UserID != p.ReadUserID) || !head.Live(s.now()) ||
		head.Status == memrow.StatusRejected || head.Status == memrow.StatusSuperseded {
		return nil, httperr.NotFound("memory not found")
	}
	if err := s.recordTouch(ctx, p.Org, ns, head.MemoryID); err != nil {
		return nil, httperr.Store("recording the touch", err)
	}
	return &touchAnswer{MemoryID: head.MemoryID, MemoryKey: key, Touched: true}, nil
}
