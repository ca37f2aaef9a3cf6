package command

import (
	"context"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/route"
)

// memory.promote copies a user's memory to the namespace's shared scope: the head of
// (namespace, "-", memrow.SharedUser, "-", key), which every user's search of the
// namespace finds (a token bound to any user included). The promoted row is a revision
// like any other, committed through the one commit (sealed, on the topic, erased with
// its namespace), and carries its provenance: who promoted it, from which namespace,
// identity, key and version. loom.shared records the promotion in the same
// transaction. Promoting again restates the shared row from the source's current
// value; a demote (demote.go) deletes it.

// promoteBody is the body of :promote and :cross_promote: the source row's identity,
// and for cross_promote the namespace it goes to.
type promoteBody struct {
	copyBody
	TargetNamespace string `json:"target_namespace"`
}

// promoteCall is one promotion: the source key, and the namespace its shared row goes to.
type promoteCall struct {
	origin
	op             string // memory.promote or memory.cross_promote
	namespace, key string
	names          route.Names
	target         string
}

// promote is memory.promote and memory.cross_promote.
func (s *Service) promote(ctx context.Context, p auth.Principal, r promoteCall) (copyAnswer, error) {
	if err := p.Namespace(r.target); err != nil {
		return nil, err
	}
	src, err := s.liveSource(ctx, p, r.namespace, r.key, r.names)
	if err != nil {
		return nil, err
	}
	now := s.now()
	if src.IsShared() && r.target == r.namespace {
		return nil, httperr.New(http.StatusConflict, CodePreconditionFailed, "the memory is the namespace's shared row already")
	}
	if src.Status != memrow.StatusActive && src.Status != memrow.StatusConflicted {
		return nil, httperr.New(http.StatusConflict, CodePreconditionFailed, "only an established fact is promoted: the memory is "+string(src.Status))
	}
	sharedID := memrow.SharedIdentity(p.Org, r.target, src.MemoryKey)
	head, err := heads.Read(ctx, s.pool, sharedID)
	if err != nil {
		return nil, httperr.Store("reading the shared row", err)
	}
	row := promotedRow(src, sharedID, head, p, r.op, now)
	event := events.TypeWritten
	var readVersion, readSeq int64
	if head != nil {
		readVersion, readSeq = head.Version, head.Seq
		if head.Live(now) {
			event = events.TypeRevised
			if head.ContentSHA256 == src.ContentSHA256 && head.Shared != nil && head.Shared.SourceMemoryID == src.MemoryID {
				// The same value from the same memory is shared already: nothing to write.
				return sharedAnswer(head, false), nil
			}
		}
	}
	pr := &pending{own: true, op: r.op, event: event, row: row, readVersion: readVersion, readSeq: readSeq}
	if err := s.embedRows(ctx, []*pending{pr}); err != nil {
		return nil, err
	}
	plan := &commitPlan{org: p.Org, namespace: r.target, requestID: r.requestID, policyGeneration: -1, idem: r.hold, liveNamespace: true,
		rows: []*pending{pr}, inCommit: func(ctx context.Context, tx pgx.Tx) error { return recordPromotion(ctx, tx, row) }}
	if err := s.commitOrContend(ctx, plan); err != nil {
		return nil, err
	}
	return sharedAnswer(row, true), nil
}

// promotedRow is the shared row a promotion of src writes over head (nil: none): the
// source's value and state as a fact of the namespace, with its provenance. It keeps
// the shared row's memory id, and drops what belongs to the source's writer (its pin,
// lock, expiry and the links to its peers).
func promotedRow(src *memrow.Row, id memrow.Identity, head *memrow.Row, p auth.Principal, op string, now time.Time) *memrow.Row {
	row := copyOf(src)
	row.Identity = id
	row.MemoryID, row.CreatedAt, row.Version, row.Seq = "", time.Time{}, 0, 0
	if head != nil {
		row.MemoryID, row.CreatedAt = head.MemoryID, head.CreatedAt
	}
	row.Status, row.Tombstone, row.Pinned, row.Locked = memrow.StatusActive, false, false, false
	row.ExpiresAt, row.OnExpire, row.SupersededBy, row.DuplicateOf, row.ConflictWith = nil, "", "", "", nil
	row.JudgementOwed, row.VerifiedBy, row.VerifiedAt, row.ReinforcementCount, row.RecallCount = false, "", nil, 0, 0
	row.EvidenceCount = 0
	row.Actor = p.Actor()
	row.Shared = &memrow.Provenance{PromotedBy: p.Actor(), PromotedAt: now.UTC(), Op: op, SourceNamespace: src.Namespace,
		SourceAgent: src.Agent, SourceUserID: src.UserID, SourceSessionID: src.SessionID, SourceKey: src.MemoryKey,
		SourceMemoryID: src.MemoryID, SourceVersion: src.Version}
	if src.Shared != nil && op == opCrossPromote {
		// A shared row promoted on into another namespace keeps its first writer's
		// provenance of who wrote it, and names the namespace it came through.
		row.Shared.SourceAgent, row.Shared.SourceUserID, row.Shared.SourceSessionID = src.Shared.SourceAgent, src.Shared.SourceUserID, src.Shared.SourceSessionID
	}
	return row
}

// sharedAnswer answers a promotion or a demotion with the shared row's state.
func sharedAnswer(row *memrow.Row, written bool) copyAnswer {
	return copyAnswer{"written": written, "memory_id": row.MemoryID, "namespace": row.Namespace, "memory_key": row.MemoryKey,
		"agent": row.Agent, "user_id": row.UserID, "session_id": row.SessionID, "version": row.Version,
		"version_text": memrow.VersionText(row.Version), "seq": row.Seq, "status": row.Status, "tombstone": row.Tombstone,
		"shared": row.Shared}
}

// Promotion ops.
const (
	opPromote      = "memory.promote"
	opCrossPromote = "memory.cross_promote"
)
