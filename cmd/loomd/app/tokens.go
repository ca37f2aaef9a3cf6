package app

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// The org's token routes (POST/GET /v1/admin/tokens, DELETE /v1/admin/tokens/{id}):
// an admin token that reaches every namespace and every user of its org manages the
// org's tokens. A narrower admin could otherwise mint a token wider than itself.

// tokenRequest is POST /v1/admin/tokens.
type tokenRequest struct {
	Role       string   `json:"role"`
	Name       string   `json:"name"`
	Namespaces []string `json:"namespaces"`
	ReadUserID string   `json:"read_user_id"`
	// ReadSessionID binds the token to one session (the own_session scope).
	ReadSessionID string     `json:"read_session_id"`
	ExpiresAt     *time.Time `json:"expires_at"`
	TTLSeconds    *int64     `json:"ttl_seconds"`
}

// tokenCreated is the answer: the secret, shown this once, and the token.
type tokenCreated struct {
	Token string `json:"token"`
	auth.TokenInfo
}

// tokenAdmin checks the caller may manage its org's tokens.
func tokenAdmin(c *fiber.Ctx) (auth.Principal, error) {
	p := auth.From(c)
	if p.Role != auth.RoleAdmin || p.Namespaces != nil || p.ReadUserID != "" || p.ReadSessionID != "" {
		return p, httperr.New(http.StatusForbidden, httperr.CodePermissionDenied,
			"only an admin token that reaches every namespace and user of the org may manage its tokens")
	}
	return p, nil
}

func (p *Process) handleTokenCreate(c *fiber.Ctx) error {
	caller, err := tokenAdmin(c)
	if err != nil {
		return err
	}
	var req tokenRequest
	if err := httperr.DecodeBody(c.Body(), &req); err != nil {
		return err
	}
	t, err := newTokenOf(caller.Org, req, time.Now())
	if err != nil {
		return err
	}
	secret, created, err := p.Tokens.Create(c.UserContext(), t)
	if errors.Is(err, auth.ErrInvalidToken) {
		return httperr.Validation("expires_at", err.Error())
	}
	if err != nil {
		return httperr.Store("creating the token", err)
	}
	info := auth.TokenInfo{TokenID: created.TokenID, Org: created.Org, Role: created.Role, Name: created.Name,
		Namespaces: created.Namespaces, ReadUserID: created.ReadUserID, ReadSessionID: created.ReadSessionID, CreatedAt: time.Now().UTC(), ExpiresAt: t.ExpiresAt}
	p.Log.Info("token created", "token_id", info.TokenID, "org", info.Org, "role", info.Role, "by", caller.Actor())
	return c.Status(http.StatusCreated).JSON(tokenCreated{Token: secret, TokenInfo: info})
}

// newTokenOf checks a create request and describes the token it asks for.
func newTokenOf(org string, req tokenRequest, now time.Time) (auth.NewToken, error) {
	t := auth.NewToken{Org: org, Role: req.Role, Name: req.Name, Namespaces: req.Namespaces, ReadUserID: req.ReadUserID,
		ReadSessionID: req.ReadSessionID, ExpiresAt: req.ExpiresAt}
	switch req.Role {
	case auth.RoleAdmin, auth.RoleWriter, auth.RoleReader:
	default:
		return t, httperr.Validation("role", "role must be admin, writer or reader")
	}
	if err := memrow.CheckText("name", req.Name); err != nil {
		return t, err
	}
	if len(req.Name) > 200 {
		return t, httperr.Validation("name", "name must be at most 200 bytes")
	}
	for _, ns := range req.Namespaces {
		if err := memrow.ValidateName("namespaces", ns); err != nil {
			return t, err
		}
	}
	if req.Namespaces != nil && len(req.Namespaces) == 0 {
		return t, httperr.Validation("namespaces", "namespaces must name at least one namespace, or be left out for all of them")
	}
	// A repeat adds no reach: stored once. A list past the bound is refused, not cut.
	t.Namespaces = auth.Distinct(req.Namespaces)
	if len(t.Namespaces) > auth.MaxNamespaces {
		return t, httperr.Validation("namespaces", fmt.Sprintf("namespaces names at most %d distinct namespaces; leave it out for all of them", auth.MaxNamespaces))
	}
	if req.ReadUserID != "" {
		if err := memrow.ValidateIdentity("read_user_id", req.ReadUserID); err != nil {
			return t, err
		}
	}
	if req.ReadSessionID != "" {
		if err := memrow.ValidateIdentity("read_session_id", req.ReadSessionID); err != nil {
			return t, err
		}
	}
	switch {
	case req.ExpiresAt != nil && req.TTLSeconds != nil:
		return t, httperr.Validation("ttl_seconds", "send expires_at or ttl_seconds, not both")
	case req.TTLSeconds != nil:
		// Checked before it is a duration, which a huge one overflows into the past.
		if *req.TTLSeconds <= 0 || *req.TTLSeconds > int64(auth.MaxLifetime/time.Second) {
			return t, httperr.Validation("ttl_seconds", fmt.Sprintf("ttl_seconds must be 1 to %d (ten years); leave it out for a token that does not expire",
				int64(auth.MaxLifetime/time.Second)))
		}
		at := now.Add(time.Duration(*req.TTLSeconds) * time.Second).UTC()
		t.ExpiresAt = &at
	case req.ExpiresAt != nil && !req.ExpiresAt.After(now):
		return t, httperr.Validation("expires_at", "expires_at must lie in the future")
	case req.ExpiresAt != nil && req.ExpiresAt.After(now.Add(auth.MaxLifetime)):
		return t, httperr.Validation("expires_at", "expires_at must lie within ten years; leave it out for a token that does not expire")
	}
	return t, nil
}

// tokenList is GET /v1/admin/tokens.
type tokenList struct {
	Tokens []auth.TokenInfo `json:"tokens"`
	// CacheTTLMS is the stated bound within which every process refuses a revoked token.
	CacheTTLMS int64 `json:"cache_ttl_ms"`
}

func (p *Process) handleTokenList(c *fiber.Ctx) error {
	caller, err := tokenAdmin(c)
	if err != nil {
		return err
	}
	tokens, err := p.Tokens.List(c.UserContext(), caller.Org)
	if err != nil {
		return httperr.Store("listing tokens", err)
	}
	if tokens == nil {
		tokens = []auth.TokenInfo{}
	}
	return c.JSON(tokenList{Tokens: tokens, CacheTTLMS: p.Tokens.CacheTTL().Milliseconds()})
}

func (p *Process) handleTokenRevoke(c *fiber.Ctx) error {
	caller, err := tokenAdmin(c)
	if err != nil {
		return err
	}
	t, err := p.Tokens.Revoke(c.UserContext(), caller.Org, c.Params("token_id"))
	if errors.Is(err, auth.ErrTokenNotFound) {
		return httperr.NotFound("token not found")
	}
	if err != nil {
		return httperr.Store("revoking the token", err)
	}
	p.Log.Info("token revoked", "token_id", t.TokenID, "org", t.Org, "by", caller.Actor())
	return c.JSON(t)
}
