package command

import (
	"context"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/extractqueue"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/llm/spend"
	"github.com/loomplane/loom/internal/pg"
)

// org.model_calls (GET and PUT /v1/orgs/self/model-calls): the per-org switch for model
// calls. Held, the org makes no model call: the conflict resolver and the entity
// extractor leave its queued rows owed (their claims skip it), a deferred
// memory.set_from_messages request waits in status held (and extractions:retry gives
// a failed one back held), an inline call is refused as the cost cap refuses it. Nothing
// fails for the hold, and nothing is lost: released, the held requests are due at once
// and the workers' rows at their next pass. An admin token of the whole org sets it.

const opModelCalls = "org.model_calls"

// modelCallsRequest is the body of PUT /v1/orgs/self/model-calls.
type modelCallsRequest struct {
	Held *bool `json:"held"`
}

// modelCallsAnswer is the org's switch.
type modelCallsAnswer struct {
	Org    string     `json:"org"`
	Held   bool       `json:"held"`
	HeldAt *time.Time `json:"held_at,omitempty"`
	HeldBy string     `json:"held_by,omitempty"`
	// Resumed counts the held extraction requests a release made due.
	Resumed int64 `json:"resumed,omitempty"`
}

func answerOfHold(org string, h *spend.Hold) *modelCallsAnswer {
	a := &modelCallsAnswer{Org: org}
	if h != nil {
		at := h.HeldAt.UTC()
		a.Held, a.HeldAt, a.HeldBy = true, &at, h.HeldBy
	}
	return a
}

// requireOrgAdmin is the switch's gate: an admin token that reaches the whole org.
func requireOrgAdmin(p auth.Principal) error {
	if err := p.RequireAdmin("the org's model-call switch"); err != nil {
		return err
	}
	if err := p.RequireEveryUser("the org's model-call switch"); err != nil {
		return err
	}
	if len(p.Namespaces) > 0 {
		return httperr.New(http.StatusForbidden, httperr.CodePermissionDenied,
			"the org's model-call switch acts on every namespace; this token names some")
	}
	return nil
}

// modelCalls reads the org's switch.
func (s *Service) modelCalls(ctx context.Context, p auth.Principal) (*modelCallsAnswer, error) {
	if err := requireOrgAdmin(p); err != nil {
		return nil, err
	}
	h, err := spend.ReadHold(ctx, s.pool, p.Org)
	if err != nil {
		return nil, httperr.Store("reading the org's model-call switch", err)
	}
	return answerOfHold(p.Org, h), nil
}

// setModelCalls holds or releases the org's model calls; a release makes the held
// extraction requests due in the same transaction.
func (s *Service) setModelCalls(ctx context.Context, p auth.Principal, req modelCallsRequest) (*modelCallsAnswer, error) {
	if err := requireOrgAdmin(p); err != nil {
		return nil, err
	}
	if req.Held == nil {
		return nil, httperr.Validation("held", "held is required: true holds the org's model calls, false releases them")
	}
	var ans *modelCallsAnswer
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if *req.Held {
			h, err := spend.SetHold(ctx, tx, p.Org, p.Actor())
			ans = answerOfHold(p.Org, h)
			return err
		}
		if _, err := spend.ClearHold(ctx, tx, p.Org); err != nil {
			return err
		}
		n, err := extractqueue.ResumeHeld(ctx, tx, p.Org)
		ans = &modelCallsAnswer{Org: p.Org, Resumed: n}
		return err
	})
	if err != nil {
		return nil, httperr.Store("setting the org's model-call switch", err)
	}
	s.log.Info("org model calls switched", "org", p.Org, "held", *req.Held, "actor", p.Actor(), "op", opModelCalls)
	return ans, nil
}
