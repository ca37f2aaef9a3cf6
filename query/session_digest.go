package query

import (
	"context"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/evidence"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// session.digest (GET /v1/namespaces/{ns}/sessions/{session_id}/digest) reads the
// newest digest of a session the workers' session_digest pass wrote
// (loom.session_summaries, internal/evidence), from the authority. A token bound to
// one user reads that user's digest of the session alone; a token bound to one
// session reads that session's alone. context.pack's session layer reads the same
// (sessionDigestOf).

// sessionDigestAnswer is session.digest's answer.
type sessionDigestAnswer struct {
	Namespace string    `json:"namespace"`
	SessionID string    `json:"session_id"`
	UserID    string    `json:"user_id"`
	Digest    string    `json:"digest"`
	WindowEnd int       `json:"window_end"` // the message index of the last turn it read
	Turns     int       `json:"turns"`      // the session's turns it covers
	Model     string    `json:"model"`
	CreatedAt time.Time `json:"created_at"`
}

// newestDigest reads the newest digest of a session within p's scope.
func (s *Service) newestDigest(ctx context.Context, p auth.Principal, namespace, sessionID string) (evidence.OpenedDigest, bool, error) {
	if err := p.Namespace(namespace); err != nil {
		return evidence.OpenedDigest{}, false, err
	}
	if err := memrow.ValidateIdentity("session_id", sessionID); err != nil {
		return evidence.OpenedDigest{}, false, err
	}
	if !p.InSession(sessionID) {
		return evidence.OpenedDigest{}, false, nil
	}
	d, ok, err := evidence.NewestDigest(ctx, s.pool, evidence.Scope{Org: p.Org, Namespace: namespace, UserID: p.ReadUserID}, sessionID)
	if err != nil {
		return evidence.OpenedDigest{}, false, httperr.Store("reading the session's digest", err)
	}
	return d, ok, nil
}

// sessionDigestOf is the session's newest digest within p's scope (false: none), as
// context.pack's session layer reads it (SessionSource.SessionDigest).
func (s *Service) sessionDigestOf(ctx context.Context, p auth.Principal, namespace, sessionID string) (string, bool, error) {
	d, ok, err := s.newestDigest(ctx, p, namespace, sessionID)
	if err != nil || !ok {
		return "", false, err
	}
	return d.Text, true, nil
}

// sessionDigest is session.digest: 404 when the session has no digest p may read.
func (s *Service) sessionDigest(ctx context.Context, p auth.Principal, namespace, sessionID string) (*sessionDigestAnswer, error) {
	d, ok, err := s.newestDigest(ctx, p, namespace, sessionID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, httperr.NotFound("the session has no digest")
	}
	return &sessionDigestAnswer{Namespace: namespace, SessionID: d.SessionID, UserID: d.UserID, Digest: d.Text,
		WindowEnd: d.WindowEnd, Turns: d.Turns, Model: d.Model, CreatedAt: d.CreatedAt.UTC()}, nil
}
