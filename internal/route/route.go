// Package route is the prelude the write side's and the read side's handlers share:
// what a memory route names (its namespace, its key, the identity the request gives
// beside them), read and checked against the request's token.
package route

import (
	"net/url"

	"github.com/gofiber/fiber/v2"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// Namespace is the request's principal and the route's namespace (:ns), checked
// against it: the token reaches the namespace (404 when not, as if it held nothing),
// then passes need (nil when reaching it is enough).
func Namespace(c *fiber.Ctx, need func(auth.Principal) error) (auth.Principal, string, error) {
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

// Key is the route's memory key (:key), percent-decoded.
func Key(c *fiber.Ctx) (string, error) { return DecodeKey(c.Params("key")) }

// DecodeKey percent-decodes a memory key as a route carries it.
func DecodeKey(raw string) (string, error) {
	key, err := url.PathUnescape(raw)
	if err != nil {
		return "", httperr.Validation("memory_key", "the key is not valid percent-encoding")
	}
	return key, nil
}

// Names are the identity a request gives beside its key, from its body or its query
// string; an absent one is "-".
type Names struct{ Agent, UserID, SessionID string }

// Identity is the key a request addresses within the token's org: the namespace, the
// key and the names, "-" where absent. A token bound to one user addresses that user's
// rows unless the request names a user; otherUser reports a request that names a user
// other than the token's (a write refuses it, a read finds nothing).
func Identity(p auth.Principal, ns, key string, n Names) (id memrow.Identity, otherUser bool) {
	id = memrow.Identity{Org: p.Org, Namespace: ns, Agent: orDefault(n.Agent), UserID: orDefault(n.UserID),
		SessionID: orDefault(n.SessionID), MemoryKey: key}
	// A promoted row (memrow.SharedUser, session "-") is in every user's and every
	// session's read scope: naming it is never naming another user or session.
	shared := n.UserID == memrow.SharedUser
	if p.ReadSessionID != "" && !shared {
		// A token bound to one session (own_session) addresses that session's rows; a
		// request naming another is out of its scope, as another user is.
		if n.SessionID == "" {
			id.SessionID = p.ReadSessionID
		}
		otherUser = id.SessionID != p.ReadSessionID
	}
	if p.ReadUserID == "" || shared {
		return id, otherUser
	}
	if n.UserID == "" {
		id.UserID = p.ReadUserID
	}
	return id, otherUser || id.UserID != p.ReadUserID
}

// WriteIdentity is Identity for a write that states a row (memory.set, update,
// bulk_set, import, set_from_messages, observe, decision.record): the shared scope
// (memrow.SharedUser) is refused, 422 naming user_id. Only memory.promote and
// memory.cross_promote write a shared row, with its provenance; a row stated there
// directly would be read by every user of the namespace as if it were promoted.
func WriteIdentity(p auth.Principal, ns, key string, n Names) (memrow.Identity, bool, error) {
	id, otherUser := Identity(p, ns, key, n)
	if err := RefuseShared(id.UserID); err != nil {
		return id, otherUser, err
	}
	return id, otherUser, nil
}

// RefuseShared is the refusal of a write that would state a row of the shared scope
// itself: nil for any other user.
func RefuseShared(userID string) error {
	if userID == memrow.SharedUser {
		return httperr.Validation("user_id", "user_id "+memrow.SharedUser+" is the namespace's shared scope: "+
			"memory.promote and memory.cross_promote write it, memory.demote removes from it")
	}
	return nil
}

func orDefault(s string) string {
	if s == "" {
		return memrow.DefaultIdentity
	}
	return s
}
