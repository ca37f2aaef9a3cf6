package command

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// memory.demote takes a key's shared row out of the namespace: a tombstone over it,
// through the one commit, so it leaves every search and read; loom.shared marks the
// promotion demoted in the same transaction. The source memory is left as it is. A
// token bound to one user demotes only what was promoted from that user's rows.

// demoteCall is a demote of the shared row of a key.
type demoteCall struct {
	origin
	namespace, key string
	// withdraw: an erasure's withdrawal (withdrawCopy), which reaches a soft-deleted
	// namespace too.
	withdraw bool
}

// demote is memory.demote.
func (s *Service) demote(ctx context.Context, p auth.Principal, r demoteCall) (copyAnswer, error) {
	id := memrow.SharedIdentity(p.Org, r.namespace, r.key)
	if err := id.Validate(); err != nil {
		return nil, err
	}
	head, err := heads.Read(ctx, s.pool, id)
	if err != nil {
		return nil, httperr.Store("reading the shared row", err)
	}
	if head == nil || (head.Shared != nil && !p.Sees(head.Shared.SourceUserID, head.Shared.SourceSessionID)) ||
		(head.Shared == nil && (p.ReadUserID != "" || p.ReadSessionID != "")) {
		return nil, httperr.NotFound("no shared memory under the key")
	}
	if !head.Live(s.now()) {
		return sharedAnswer(head, false), nil // demoted already
	}
	if head.Locked {
		return nil, locked("demote")
	}
	row := copyOf(head)
	row.Tombstone, row.Actor = true, p.Actor()
	plan := &commitPlan{org: p.Org, namespace: r.namespace, requestID: r.requestID, policyGeneration: -1, idem: r.hold, liveNamespace: !r.withdraw,
		rows:     []*pending{{own: true, op: "memory.demote", event: events.TypeTombstoned, row: row, readVersion: head.Version, readSeq: head.Seq}},
		inCommit: func(ctx context.Context, tx pgx.Tx) error { return recordDemotion(ctx, tx, id, p.Actor()) }}
	if err := s.commitOrContend(ctx, plan); err != nil {
		return nil, err
	}
	return sharedAnswer(row, true), nil
}
