package command

import (
	"errors"
	"net/http"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/idempotency"
	"github.com/loomplane/loom/internal/pg"
)

// Codes of a write's refusals (schemas/openapi.yaml, memory.set).
const (
	CodeBlacklisted        = httperr.CodeBlacklisted
	CodeKeyHoldsFact       = httperr.CodeKeyHoldsFact
	CodePreconditionFailed = httperr.CodePreconditionFailed
)

// locked is 423: the key is locked against the named action.
func locked(action string) *httperr.Error {
	return httperr.New(http.StatusLocked, httperr.CodeLocked, "the memory is locked").With("refused_action", action)
}

// otherUser refuses a user-bound token that names another user's rows in a write.
func otherUser() *httperr.Error {
	return httperr.New(http.StatusForbidden, httperr.CodePermissionDenied, "this token writes only its own user's memories")
}

// otherUserNotFound answers a user-bound token that names another user's existing
// rows (memory.update, memory.clear): as if they were absent, so it learns nothing of
// them (schemas/openapi.yaml).
func otherUserNotFound(what string) *httperr.Error { return httperr.NotFound(what + " not found") }

func pinnedConflict(msg string) *httperr.Error {
	return httperr.New(http.StatusConflict, httperr.CodePinnedConflict, msg)
}

// contended is the retryable 503 of an admission that could not settle: the key,
// its peers or the policy kept changing under it.
func contended(cause error) *httperr.Error {
	return httperr.Unavailable(httperr.CodeAdmissionContended, "the namespace kept changing while this write was admitted; retry", cause)
}

// commitError answers a commit that failed: a lock it waited for too long is
// contention; a Postgres that went away is a retryable 503.
func commitError(err error) *httperr.Error {
	var refused *httperr.Error
	switch {
	case errors.As(err, &refused):
		return refused // the commit's own refusal (a soft-deleted namespace)
	case errors.Is(err, errErased):
		return httperr.NotFound("memory not found: it was erased since it was read")
	case errors.Is(err, idempotency.ErrTakenOver):
		return idempotency.TakenOver(err)
	case pg.Conflict(err):
		return contended(err)
	}
	return httperr.Store("committing the revision", err)
}

// peersUnavailable answers a peer read that failed. ClickHouse that did not answer in
// time is the seeds' "ClickHouse unreachable": a semantic admission answers the
// retryable 503 PROJECTION_BEHIND until it is back (postgres-authority.md, Failure).
func peersUnavailable(doing string, err error) *httperr.Error {
	if ch.Unavailable(err) {
		return httperr.Unavailable(httperr.CodeProjectionBehind, "ClickHouse does not answer: this write cannot be judged against its peers until it does; retry", err)
	}
	return httperr.Store(doing, err)
}

// peerReadError maps a peer read's failure: errPeersMoved passes through (the round
// goes again); ClickHouse that does not answer is the seeds' 503 PROJECTION_BEHIND
// (peersUnavailable); a Postgres error reading the heads is the store's answer.
func peerReadError(doing string, err error) error {
	if errors.Is(err, errPeersMoved) {
		return err
	}
	return peersUnavailable(doing, err)
}
