package app

import (
	"github.com/gofiber/fiber/v2"

	"github.com/loomplane/loom/internal/auth"
)

// tokenSelf is GET /v1/token (token.self): what the caller's own token reaches, so a
// client (the console) can show what it may do before it tries. It names no secret.
type tokenSelf struct {
	TokenID    string   `json:"token_id"`
	Org        string   `json:"org"`
	Role       string   `json:"role"`
	Name       string   `json:"name"`
	Namespaces []string `json:"namespaces"` // null: every namespace of the org
	ReadUserID string   `json:"read_user_id,omitempty"`
	// ReadSessionID: the one session an own_session token reaches.
	ReadSessionID string `json:"read_session_id,omitempty"`
	CanWrite      bool   `json:"can_write"`
}

func (p *Process) handleTokenSelf(c *fiber.Ctx) error {
	caller := auth.From(c)
	return c.JSON(tokenSelf{TokenID: caller.TokenID, Org: caller.Org, Role: caller.Role, Name: caller.Name,
		Namespaces: caller.Namespaces, ReadUserID: caller.ReadUserID, ReadSessionID: caller.ReadSessionID, CanWrite: caller.CanWrite()})
}
