package app

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/kafka"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/projector"
)

// registerAdmin mounts the operator routes: admin tokens only.
func (p *Process) registerAdmin(app *fiber.App) {
	g := app.Group("/v1/admin", p.Tokens.Middleware())
	g.Post("/projections/:name\\:reset", p.handleProjectionReset)
	g.Post("/tokens", p.handleTokenCreate)
	g.Get("/tokens", p.handleTokenList)
	g.Delete("/tokens/:token_id", p.handleTokenRevoke)
}

// resetRequest is POST /v1/admin/projections/{name}:reset: the projection from the
// path, the rest from the body.
type resetRequest struct {
	Name    string `json:"-"`
	To      string `json:"to"`
	Execute bool   `json:"execute"`
}

// resetAnswer is the plan, and whether it was carried out.
type resetAnswer struct {
	*projector.ResetPlan
	Executed bool `json:"executed"`
	// PausedHere says this process stopped its own projector of the projection for
	// the reset and started it again.
	PausedHere bool `json:"paused_here"`
}

// handleProjectionReset checks the caller and the path before it reads the body.
func (p *Process) handleProjectionReset(c *fiber.Ctx) error {
	if auth.From(c).Role != auth.RoleAdmin {
		return httperr.New(http.StatusForbidden, httperr.CodePermissionDenied, "only an admin token may reset a projection")
	}
	req := resetRequest{Name: c.Params("name")}
	if err := memrow.ValidateName("name", req.Name); err != nil {
		return err
	}
	if err := httperr.DecodeBody(c.Body(), &req); err != nil {
		return err
	}
	ans, err := p.resetProjection(c.UserContext(), req)
	if err != nil {
		return err
	}
	return c.JSON(ans)
}

// resetProjection moves a projection's consumer group offsets (replay). Without
// Execute it only answers the plan. With it, it pauses this process's projector of
// that projection (its consumer leaves the group), resets, and resumes it, so a reset
// works against `loomd dev`; a group with members in other processes is refused.
func (p *Process) resetProjection(ctx context.Context, req resetRequest) (*resetAnswer, error) {
	if req.To == "" {
		return nil, httperr.Validation("to", "to is required: earliest, latest or an RFC 3339 time")
	}
	target, err := projector.ParseResetTarget(req.To)
	if err != nil {
		return nil, httperr.Validation("to", err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cl, err := kafka.NewClient(p.Cfg.Kafka.Brokers)
	if err != nil {
		return nil, kafkaDown("connecting to Kafka", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	group := projector.Group(req.Name)
	if !req.Execute {
		plan, err := projector.PlanReset(ctx, adm, group, p.Cfg.Pipeline.Topic, target)
		if err != nil {
			return nil, kafkaDown("planning the reset", err)
		}
		return &resetAnswer{ResetPlan: plan}, nil
	}
	resume, paused, err := p.pauseProjector(ctx, req.Name)
	if err != nil {
		return nil, kafkaDown("pausing this process's projector", err)
	}
	defer resume()
	plan, err := projector.PlanReset(ctx, adm, group, p.Cfg.Pipeline.Topic, target)
	if err != nil {
		return nil, kafkaDown("planning the reset", err)
	}
	if len(plan.Members) > 0 {
		return nil, groupActive(plan)
	}
	if err := projector.ExecuteReset(ctx, adm, plan); errors.Is(err, projector.ErrGroupActive) {
		return nil, groupActive(plan)
	} else if err != nil {
		return nil, kafkaDown("resetting the offsets", err)
	}
	p.Log.Info("projection reset", "projection", req.Name, "group", group, "to", plan.To, "paused_here", paused)
	return &resetAnswer{ResetPlan: plan, Executed: true, PausedHere: paused}, nil
}

func kafkaDown(doing string, err error) *httperr.Error {
	return httperr.Unavailable(httperr.CodeKafkaDown, "Kafka did not answer while "+doing+"; retry", err)
}

func groupActive(plan *projector.ResetPlan) *httperr.Error {
	return httperr.New(http.StatusConflict, httperr.CodeGroupActive,
		"the projection's consumer group has live members in other processes; stop their projectors first").
		With("members", plan.Members)
}
