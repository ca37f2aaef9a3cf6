package command

import (
	"context"
	"errors"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/route"
)

// clearBatch is how many heads one commit of memory.clear tombstones.
const clearBatch = 500

// clearRequest narrows memory.clear to an identity scope; an empty field does not narrow.
type clearRequest struct {
	Agent     string `json:"agent"`
	UserID    string `json:"user_id"`
	SessionID string `json:"session_id"`
}

// clearCall is a memory.clear of the route's namespace, narrowed to scope.
type clearCall struct {
	origin
	namespace string
	scope     clearRequest
}

// clear is memory.clear: it tombstones every live head of the namespace (or of an
// identity scope within it), a batch per commit, each over the head it read. A locked
// row is left as it is and counted.
func (s *Service) clear(ctx context.Context, p auth.Principal, r clearCall) (*clearAnswer, error) {
	ns, req := r.namespace, r.scope
	for _, f := range []struct{ name, v string }{{"agent", req.Agent}, {"user_id", req.UserID}, {"session_id", req.SessionID}} {
		if f.v != "" {
			if err := memrow.ValidateIdentity(f.name, f.v); err != nil {
				return nil, err
			}
		}
	}
	// Shared rows leave by memory.demote, which keeps loom.shared true.
	if err := route.RefuseShared(req.UserID); err != nil {
		return nil, err
	}
	if p.ReadUserID != "" {
		if req.UserID != "" && req.UserID != p.ReadUserID {
			return nil, otherUserNotFound("namespace")
		}
		req.UserID = p.ReadUserID
	}
	if p.ReadSessionID != "" {
		if req.SessionID != "" && req.SessionID != p.ReadSessionID {
			return nil, otherUserNotFound("namespace")
		}
		req.SessionID = p.ReadSessionID
	}
	tombstoned, batches := 0, 0
	for round := 0; ; round++ {
		if round > 1000 {
			return nil, contended(errHeadMoved)
		}
		batch, err := s.clearHeads(ctx, p.Org, ns, req)
		if err != nil {
			return nil, httperr.Store("reading the heads to clear", err)
		}
		if len(batch) == 0 {
			break
		}
		plan := &commitPlan{org: p.Org, namespace: ns, requestID: r.requestID, policyGeneration: -1, liveNamespace: true}
		for _, h := range batch {
			row := copyOf(h)
			row.Tombstone, row.Actor = true, p.Actor()
			plan.rows = append(plan.rows, &pending{own: true, op: "memory.clear", event: events.TypeTombstoned, row: row, readVersion: h.Version, readSeq: h.Seq})
		}
		err = s.commit(ctx, plan)
		if errors.Is(err, errHeadMoved) || errors.Is(err, errErased) {
			continue // a key moved under the batch, or was erased: read them again
		}
		if err != nil {
			return nil, commitError(err)
		}
		tombstoned += len(batch)
		batches++
	}
	locked, err := s.countLocked(ctx, p.Org, ns, req)
	if err != nil {
		return nil, httperr.Store("counting locked heads", err)
	}
	return &clearAnswer{Tombstoned: tombstoned, SkippedLocked: locked, Batches: batches}, nil
}

type clearAnswer struct {
	Tombstoned    int   `json:"tombstoned"`
	SkippedLocked int64 `json:"skipped_locked"`
	Batches       int   `json:"batches"`
}

func (a *clearAnswer) committed() bool { return a.Tombstoned > 0 }

func (a *clearAnswer) outcome() string {
	if a.committed() {
		return "ok"
	}
	return "nothing_written"
}

// clearScope is the heads a memory.clear of the namespace narrowed to req reaches.
func clearScope(org, ns string, req clearRequest) heads.Scope {
	return heads.Scope{Org: org, Namespace: ns, Agent: req.Agent, UserID: req.UserID, SessionID: req.SessionID}
}

func (s *Service) clearHeads(ctx context.Context, org, ns string, req clearRequest) ([]*memrow.Row, error) {
	return heads.Unlocked(ctx, s.pool, clearScope(org, ns, req), clearBatch)
}

func (s *Service) countLocked(ctx context.Context, org, ns string, req clearRequest) (int64, error) {
	return heads.CountLocked(ctx, s.pool, clearScope(org, ns, req))
}
