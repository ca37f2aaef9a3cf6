package query

import (
	"fmt"
	"strings"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/memrow"
)

// filter is what a search (or a list) is narrowed to; empty fields do not narrow.
type filter struct {
	org                      string
	agent, userID, sessionID string
	memoryType               string
	tags                     []string
	tagsAny                  bool
	statuses                 []memrow.Status
	asOf                     *time.Time
	// expiresAt is when expiry is judged (nil: now): a listing of the namespace as it
	// was at a past time judges it then.
	expiresAt *time.Time
	// withDeleted keeps deleted and expired rows: a recovery listing's.
	withDeleted bool
	// shared adds the promoted rows (memrow.SharedUser) to a filter on one user or one
	// session: they are in every user's and every session's read scope (search's
	// shared scope), so they pass the user and session the filter names.
	shared bool
	// provenance narrows a search to rows naming entities, of source classes, or
	// verified (search_provenance.go); the legs do not read it, the heads do.
	provenance provenanceFilter
}

// hides reports whether f leaves out rows of memoryType: a hidden type (a reflection)
// is served only to a filter that names it.
func (f filter) hides(memoryType string) bool {
	return memrow.HiddenTypes[memoryType] && f.memoryType != memoryType
}

// withShared is f with the promoted rows beside its user's or session's rows, when it
// names either (and neither is out of the token's scope).
func (f filter) withShared() filter {
	f.shared = (f.userID != "" || f.sessionID != "") && f.userID != noUser && f.sessionID != noUser
	return f
}

// identityMatches reports whether a row of userID and sessionID passes the filter's
// user and session.
func (f filter) identityMatches(userID, sessionID string) bool {
	if f.shared && userID == memrow.SharedUser {
		return true
	}
	return (f.userID == "" || userID == f.userID) && (f.sessionID == "" || sessionID == f.sessionID)
}

// noUser is the user filter of a token bound to one user asking for another: it
// matches no row (and no text column holds a NUL).
const noUser = "\x00none"

// scopedUser is a filter's user_id under the token's read scope: a token bound to one
// user reads that user's rows; another user's rows are absent to it, not forbidden.
func scopedUser(p auth.Principal, userID string) string {
	switch {
	case p.ReadUserID == "":
		return userID
	case userID != "" && userID != p.ReadUserID:
		return noUser
	}
	return p.ReadUserID
}

// scopedSession is a filter's session_id under the token's read scope: a token bound
// to one session (own_session) reads that session's rows alone.
func scopedSession(p auth.Principal, sessionID string) string {
	switch {
	case p.ReadSessionID == "":
		return sessionID
	case sessionID != "" && sessionID != p.ReadSessionID:
		return noUser
	}
	return p.ReadSessionID
}

// where builds the shared predicates of a leg over one namespace: identity columns in
// PREWHERE, so only the namespace's granules are read, and the row state search never
// serves in WHERE. validate checks all of it again on the Postgres head.
func (f filter) where(ns string, tagsColumn bool) (prewhere, where string, args []any) {
	pre := []string{"org = ?", "namespace = ?"}
	args = []any{f.org, ns}
	if f.agent != "" {
		pre = append(pre, "agent = ?")
		args = append(args, f.agent)
	}
	var who []string
	for _, p := range []struct{ col, v string }{{"user_id", f.userID}, {"session_id", f.sessionID}} {
		if p.v != "" {
			who = append(who, p.col+" = ?")
			args = append(args, p.v)
		}
	}
	switch {
	case len(who) > 0 && f.shared:
		pre = append(pre, "(("+strings.Join(who, " AND ")+") OR user_id = ?)")
		args = append(args, memrow.SharedUser)
	case len(who) > 0:
		pre = append(pre, who...)
	}
	at := "now()"
	if f.asOf != nil {
		at = fmt.Sprintf("toDateTime(%d)", f.asOf.Unix())
	}
	expires := "now()"
	if f.expiresAt != nil {
		expires = fmt.Sprintf("toDateTime(%d)", f.expiresAt.Unix())
	}
	w := []string{"tombstone = 0", "(expires_at IS NULL OR expires_at > " + expires + ")", "sensitivity != 'high'", "has(?, status)",
		"(valid_to IS NULL OR valid_to > " + at + ")"}
	if f.withDeleted {
		w = w[2:]
	}
	statuses := make([]string, len(f.statuses))
	for i, st := range f.statuses {
		statuses[i] = string(st)
	}
	args = append(args, statuses)
	if f.memoryType != "" {
		w = append(w, "memory_type = ?")
		args = append(args, f.memoryType)
	}
	if len(f.tags) > 0 && tagsColumn {
		if f.tagsAny {
			w = append(w, "hasAny(tags, ?)")
		} else {
			w = append(w, "hasAll(tags, ?)")
		}
		args = append(args, f.tags)
	}
	return strings.Join(pre, " AND "), strings.Join(w, " AND "), args
}

const identityCols = "agent, user_id, session_id, memory_key, content_sha256, memory_type"
