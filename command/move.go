package command

import (
	"context"
	"errors"
	"net/http"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/route"
)

// memory.copy writes a live memory's value and state under another key, identity or
// namespace the token reaches; memory.move does the same and deletes the source. The
// copy is a write of its own (a new memory id, its own history from here on): a later
// redaction of the source does not reach it. Within one namespace a move is one commit,
// the copy and the source's tombstone together; across namespaces it is two, the copy
// first, so a move cut short leaves the memory in both places, never in neither.

// moveBody is the body of :copy and :move: the source's identity, and where it goes
// (each target field defaults to the source's).
type moveBody struct {
	copyBody
	TargetNamespace string `json:"target_namespace"`
	TargetKey       string `json:"target_key"`
	TargetAgent     string `json:"target_agent"`
	TargetUserID    string `json:"target_user_id"`
	TargetSessionID string `json:"target_session_id"`
}

// moveCall is one memory.copy or memory.move.
type moveCall struct {
	origin
	namespace, key string
	body           moveBody
	move           bool
}

func orSame(v, same string) string {
	if v == "" {
		return same
	}
	return v
}

// copyMemory is memory.copy, and memory.move when r.move.
func (s *Service) copyMemory(ctx context.Context, p auth.Principal, r moveCall) (copyAnswer, error) {
	op := "memory.copy"
	if r.move {
		op = "memory.move"
	}
	src, err := s.liveSource(ctx, p, r.namespace, r.key, r.body.names())
	if err != nil {
		return nil, err
	}
	b := r.body
	targetNS := orSame(b.TargetNamespace, src.Namespace)
	if err := p.Namespace(targetNS); err != nil {
		return nil, err
	}
	if targetNS != src.Namespace {
		if err := s.refuseDeletedNamespace(ctx, p.Org, targetNS); err != nil {
			return nil, err
		}
	}
	tid, other := route.Identity(p, targetNS, orSame(b.TargetKey, src.MemoryKey), route.Names{Agent: orSame(b.TargetAgent, src.Agent),
		UserID: orSame(b.TargetUserID, src.UserID), SessionID: orSame(b.TargetSessionID, src.SessionID)})
	if other {
		return nil, otherUser()
	}
	if err := tid.Validate(); err != nil {
		return nil, err
	}
	if tid == src.Identity {
		return nil, httperr.Validation("target_key", "the target is the memory itself: name another namespace, key or identity")
	}
	if tid.UserID == memrow.SharedUser {
		return nil, httperr.Validation("target_user_id", "the shared scope is written by memory.promote")
	}
	target, err := heads.Read(ctx, s.pool, tid)
	if err != nil {
		return nil, httperr.Store("reading the target's head", err)
	}
	now := s.now()
	if target != nil && target.Live(now) {
		return nil, httperr.New(http.StatusConflict, CodePreconditionFailed, "the target key holds a live memory: delete it first")
	}
	row := copyOf(src)
	row.Identity = tid
	row.MemoryID, row.Version, row.Seq, row.Pinned, row.Locked, row.Shared = "", 0, 0, false, false, nil
	row.SupersededBy, row.DuplicateOf, row.ConflictWith, row.JudgementOwed = "", "", nil, false
	row.CreatedAt = now.UTC()
	row.Actor = p.Actor()
	copied := &pending{own: true, op: op, event: events.TypeWritten, row: row}
	if target != nil {
		copied.readVersion, copied.readSeq = target.Version, target.Seq
		row.MemoryID = target.MemoryID
	}
	if err := s.embedRows(ctx, []*pending{copied}); err != nil {
		return nil, err
	}
	plan := &commitPlan{org: p.Org, namespace: tid.Namespace, requestID: r.requestID, policyGeneration: -1, idem: r.hold, rows: []*pending{copied},
		liveNamespace: true}
	var gone *pending
	if r.move {
		if src.Locked {
			return nil, locked("move")
		}
		tomb := copyOf(src)
		tomb.Tombstone, tomb.Actor = true, p.Actor()
		gone = &pending{own: true, op: op, event: events.TypeTombstoned, row: tomb, readVersion: src.Version, readSeq: src.Seq}
		if tid.Namespace == src.Namespace {
			plan.rows = append(plan.rows, gone)
			gone = nil
		}
	}
	if err := s.commitOrContend(ctx, plan); err != nil {
		return nil, err
	}
	if gone != nil {
		if err := s.commitOrContend(ctx, &commitPlan{org: p.Org, namespace: src.Namespace, requestID: r.requestID, policyGeneration: -1, liveNamespace: true,
			rows: []*pending{gone}}); err != nil {
			return nil, err
		}
	}
	ans := copyAnswer{"written": true, "memory_id": row.MemoryID, "namespace": row.Namespace, "memory_key": row.MemoryKey,
		"agent": row.Agent, "user_id": row.UserID, "session_id": row.SessionID, "version": row.Version,
		"version_text": memrow.VersionText(row.Version), "seq": row.Seq, "source_memory_id": src.MemoryID, "moved": r.move}
	return ans, nil
}

// liveSource reads the live head a copy, a move or a promotion starts from, in the
// token's read scope (404 otherwise).
func (s *Service) liveSource(ctx context.Context, p auth.Principal, ns, key string, names route.Names) (*memrow.Row, error) {
	id, err := keyIdentity(p, ns, key, names)
	if err != nil {
		return nil, err
	}
	if err := s.refuseDeletedNamespace(ctx, p.Org, ns); err != nil {
		return nil, err
	}
	src, err := heads.Read(ctx, s.pool, id)
	if err != nil {
		return nil, httperr.Store("reading the memory", err)
	}
	if src == nil || !src.Live(s.now()) || (!p.ActsOn(src.UserID) && !src.IsShared()) {
		return nil, httperr.NotFound("memory not found")
	}
	return src, nil
}

// commitOrContend commits a plan, answering a head that moved as 503 ADMISSION_CONTENDED.
func (s *Service) commitOrContend(ctx context.Context, plan *commitPlan) error {
	if err := s.commit(ctx, plan); err != nil {
		if errors.Is(err, errHeadMoved) {
			return contended(err)
		}
		return commitError(err)
	}
	return nil
}
