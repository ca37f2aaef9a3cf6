package command

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/loomplane/loom/internal/auth"
)

// The write side owns loom.namespace_operations: the audit row of each bulk write of a
// namespace (a restore, a rollback run, a blacklist sweep), written before its first
// batch and completed after its last, so one cut short is on record with what it wrote.

// opAudit is one bulk write on record.
type opAudit struct {
	s   *Service
	org string
	id  uuid.UUID
}

// startOp writes the audit row of op over ns; params names what was asked (as_of, a
// snapshot id, the patterns).
func (s *Service) startOp(ctx context.Context, p auth.Principal, op, ns, requestID string, params any) (*opAudit, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	a := &opAudit{s: s, org: p.Org, id: uuid.New()}
	if _, err := s.pool.Exec(ctx, `INSERT INTO loom.namespace_operations (org, id, op, namespace, actor, request_id, params)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, a.org, a.id, op, ns, p.Actor(), requestID, raw); err != nil {
		return nil, fmt.Errorf("write the audit row: %w", err)
	}
	return a, nil
}

// finish completes the row with what landed and the error that stopped the run (nil
// for none). The run's answer stands whatever happens to the row: a failure is logged.
// A nil audit (a dry run) records nothing.
func (a *opAudit) finish(ctx context.Context, counts any, batches int, runErr error) {
	if a == nil {
		return
	}
	raw, err := json.Marshal(counts)
	if err != nil {
		a.s.log.Warn("completing a bulk write's audit row failed", "id", a.id, "err", err)
		return
	}
	var e *string
	if runErr != nil {
		msg := runErr.Error()
		e = &msg
	}
	if _, err := a.s.pool.Exec(context.WithoutCancel(ctx), `UPDATE loom.namespace_operations
		SET counts = $3, batches = $4, error = $5, completed_at = now() WHERE org = $1 AND id = $2`,
		a.org, a.id, raw, batches, e); err != nil {
		a.s.log.Warn("completing a bulk write's audit row failed", "id", a.id, "err", err)
	}
}
