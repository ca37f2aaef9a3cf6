package command

import (
	"context"
	"fmt"
	"net/http"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// A document may be written on a user's behalf, as a memory is: the request's user_id,
// or, for a token bound to a user, that user (naming another is refused, 403, as
// memory's writes refuse it). A document with no user is the namespace's: every user's
// reads see it, and only a namespace's or an org's erasure removes it. A user's
// document is seen by that user's reads and by unbound tokens, and goes with the
// user's erasure. A source keeps the user of its first version: a write for another
// user is refused (409), so a head's user is every one of its revisions' user.

// documentUser is the user a write is for: requested ("" or "-": none, the
// namespace's), or the token's bound user.
func documentUser(p auth.Principal, field, requested string) (string, error) {
	if requested == memrow.DefaultIdentity {
		requested = ""
	}
	if requested != "" {
		if err := memrow.ValidateIdentity(field, requested); err != nil {
			return "", err
		}
		if requested == memrow.SharedUser {
			return "", httperr.Validation(field, "user_id "+memrow.SharedUser+" names memory's shared scope, not a user: "+
				"a document for every user of the namespace names no user")
		}
	}
	if p.ReadUserID == "" {
		return requested, nil
	}
	if requested != "" && requested != p.ReadUserID {
		return "", httperr.New(http.StatusForbidden, httperr.CodePermissionDenied, "this token writes only its own user's documents")
	}
	return p.ReadUserID, nil
}

// sees reports whether the token may read or change a document of userID ("" the
// namespace's): a token bound to a user reaches the namespace's documents and its
// user's; another user's are absent to it.
func sees(p auth.Principal, userID string) bool { return userID == "" || p.ActsOn(userID) }

// sourceTaken is the refusal of a write for a user other than the source's.
func sourceTaken(uri string) *httperr.Error {
	return (&httperr.Error{Status: http.StatusConflict, Code: httperr.CodePreconditionFailed, Field: "user_id",
		Message: fmt.Sprintf("%q is another user's document, or the namespace's: a source keeps the user it was first written for; "+
			"write this one under another source_uri", uri)}).With("source_uri", uri)
}

// userRef is a user's reference on the topic (events.UserRef) and the generation of
// the key that made it (the record's ce_loomrefgen); the zero value names no one.
type userRef struct {
	ref string
	gen int
}

// userRefs are the topic's references of the plans' users, read (and the org's key
// made, which loom.named_user needs) before the commit's transaction.
func (s *Service) userRefs(ctx context.Context, org string, plans []*plan) (map[string]userRef, error) {
	refs := map[string]userRef{}
	for _, pl := range plans {
		if pl.user == "" || refs[pl.user].ref != "" {
			continue
		}
		ref, gen, err := s.refs.CurrentRef(ctx, org, pl.user)
		if err != nil {
			return nil, httperr.Store("reading the org's user reference key", err)
		}
		refs[pl.user] = userRef{ref: ref, gen: gen}
	}
	return refs, nil
}
