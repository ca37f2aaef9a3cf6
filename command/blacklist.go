package command

import (
	"context"
	"regexp"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// maxPatternChars bounds a blacklist pattern; RE2 runs in linear time, so length is
// the only cost to bound.
const maxPatternChars = 1000

type blacklistRequest struct {
	Pattern string `json:"pattern"`
}

// handleBlacklistAdd is blacklist.add: an RE2 pattern no value of the namespace may
// match from the next admission on (422 BLACKLISTED).
func (s *Service) handleBlacklistAdd(c *fiber.Ctx) error {
	return s.changeBlacklist(c, func(ctx context.Context, tx pgx.Tx, p auth.Principal, ns, pattern string) error {
		_, err := tx.Exec(ctx, `INSERT INTO loom.blacklist (org, namespace, pattern, created_by) VALUES ($1, $2, $3, $4)
			ON CONFLICT DO NOTHING`, p.Org, ns, pattern, p.Actor())
		return err
	})
}

// handleBlacklistRemove is blacklist.remove.
func (s *Service) handleBlacklistRemove(c *fiber.Ctx) error {
	return s.changeBlacklist(c, func(ctx context.Context, tx pgx.Tx, p auth.Principal, ns, pattern string) error {
		_, err := tx.Exec(ctx, `DELETE FROM loom.blacklist WHERE org = $1 AND namespace = $2 AND pattern = $3`, p.Org, ns, pattern)
		return err
	})
}

func (s *Service) changeBlacklist(c *fiber.Ctx, change func(context.Context, pgx.Tx, auth.Principal, string, string) error) error {
	p, ns, err := routeNamespace(c, adminFor("changing a namespace's policy"))
	if err != nil {
		return err
	}
	var req blacklistRequest
	if err := httperr.DecodeBody(c.Body(), &req); err != nil {
		return err
	}
	if req.Pattern == "" || utf8.RuneCountInString(req.Pattern) > maxPatternChars {
		return httperr.Validation("pattern", "pattern must be 1 to 1000 characters")
	}
	if err := memrow.CheckText("pattern", req.Pattern); err != nil {
		return err
	}
	if _, err := regexp.Compile(req.Pattern); err != nil {
		return httperr.Validation("pattern", "not a valid RE2 pattern: "+err.Error())
	}
	ctx := c.UserContext()
	err = s.changePolicy(ctx, p.Org, func(tx pgx.Tx) error { return change(ctx, tx, p, ns, req.Pattern) })
	if err != nil {
		return httperr.Store("changing the blacklist", err)
	}
	pol, err := s.loadPolicy(ctx, s.pool, p.Org, ns)
	if err != nil {
		return httperr.Store("reading the namespace policy", err)
	}
	return c.JSON(answerOf(ns, pol))
}
