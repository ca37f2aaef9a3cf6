package app

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/kafka"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/watermarks"
	"github.com/loomplane/loom/projector"
)

// registerAdmin mounts the admin routes, each with its own guard (a group's would
// guard every route under its prefix): a projection's reset acts on every org's
// projection, so it takes the operator's token alone, never an org's; the token routes
// are an org admin's, over its org's tokens.
func (p *Process) registerAdmin(app *fiber.App) {
	app.Post("/v1/admin/projections/:name\\:reset", p.Tokens.OperatorMiddleware(), p.handleProjectionReset)
	org := p.Tokens.Middleware()
	app.Post("/v1/admin/tokens", org, p.handleTokenCreate)
	app.Get("/v1/admin/tokens", org, p.handleTokenList)
	app.Delete("/v1/admin/tokens/:token_id", org, p.handleTokenRevoke)
	app.Get("/v1/token", org, p.handleTokenSelf)
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

// handleProjectionReset checks the path before it reads the body; the operator's
// token was checked at the group.
func (p *Process) handleProjectionReset(c *fiber.Ctx) error {
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
// works against `loomd dev`; a group with members in other processes is refused. A
// forward move never skips what the projection has not applied (HoldUnapplied). A
// projection this deployment never ran is 404: a retry would not make it exist.
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
	known := req.Name == p.Cfg.Pipeline.Projection
	if !known {
		if known, err = watermarks.Exists(ctx, p.PG, req.Name); err != nil {
			return nil, httperr.Store("looking the projection up", err)
		}
	}
	cl, err := kafka.NewClient(p.Cfg.Kafka.Brokers)
	if err != nil {
		return nil, kafkaDown("connecting to Kafka", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	group := projector.Group(req.Name)
	plan := func() (*projector.ResetPlan, error) {
		plan, err := projector.PlanReset(ctx, adm, group, p.Cfg.Pipeline.Topic, target)
		if err != nil {
			return nil, kafkaDown("planning the reset", err)
		}
		if !known && len(plan.Members) == 0 && !plan.Committed() {
			return nil, httperr.NotFound("no projection " + req.Name + ": it has no watermarks and its consumer group " + group + " has committed nothing")
		}
		marks, err := watermarks.ReadProjection(ctx, p.PG, req.Name)
		if err != nil {
			return nil, httperr.Store("reading the projection's watermarks", err)
		}
		if err := projector.HoldUnapplied(ctx, adm, p.Cfg.Kafka.Brokers, marks, plan); err != nil {
			return nil, kafkaDown("reading the records the reset would skip", err)
		}
		return plan, nil
	}
	if !req.Execute {
		pl, err := plan()
		if err != nil {
			return nil, err
		}
		return &resetAnswer{ResetPlan: pl}, nil
	}
	resume, paused, err := p.pauseProjector(ctx, req.Name)
	if err != nil {
		return nil, kafkaDown("pausing this process's projector", err)
	}
	defer resume()
	pl, err := plan()
	if err != nil {
		return nil, err
	}
	if len(pl.Members) > 0 {
		return nil, groupActive(pl)
	}
	if err := projector.ExecuteReset(ctx, adm, pl); errors.Is(err, projector.ErrGroupActive) {
		return nil, groupActive(pl)
	} else if err != nil {
		return nil, kafkaDown("resetting the offsets", err)
	}
	p.Log.Info("projection reset", "projection", req.Name, "group", group, "to", pl.To, "paused_here", paused)
	return &resetAnswer{ResetPlan: pl, Executed: true, PausedHere: paused}, nil
}

func kafkaDown(doing string, err error) *httperr.Error {
	return httperr.Unavailable(httperr.CodeKafkaDown, "Kafka did not answer while "+doing+"; retry", err)
}

func groupActive(plan *projector.ResetPlan) *httperr.Error {
	return httperr.New(http.StatusConflict, httperr.CodeGroupActive,
		"the projection's consumer group has live members in other processes; stop their projectors first").
		With("members", plan.Members)
}
