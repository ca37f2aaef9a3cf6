package command

import (
	"net/url"

	"github.com/gofiber/fiber/v2"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
)

// routeNamespace is the route's namespace, checked against the token: the token
// reaches it and passes need (nil when reaching it is enough).
func routeNamespace(c *fiber.Ctx, need func(auth.Principal) error) (auth.Principal, string, error) {
	p := auth.From(c)
	ns := c.Params("ns")
	if err := p.Namespace(ns); err != nil {
		return p, ns, err
	}
	if need != nil {
		if err := need(p); err != nil {
			return p, ns, err
		}
	}
	return p, ns, nil
}

// mayWrite asks a token for a writer's role.
func mayWrite(p auth.Principal) error { return p.RequireWrite() }

// adminFor asks a token for an admin's role, naming what needs it.
func adminFor(what string) func(auth.Principal) error {
	return func(p auth.Principal) error { return requireAdminFor(p, what) }
}

// routeKey is the route's memory key, percent-decoded.
func routeKey(c *fiber.Ctx) (string, error) { return decodeKey(c.Params("key")) }

// decodeKey percent-decodes a memory key as a route carries it.
func decodeKey(raw string) (string, error) {
	key, err := url.PathUnescape(raw)
	if err != nil {
		return "", httperr.Validation("memory_key", "the key is not valid percent-encoding")
	}
	return key, nil
}
