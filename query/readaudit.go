package query

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/loomplane/loom/internal/snapshot"
)

// The read side owns loom.read_audit: the hash-only row every bulk read that hands
// memory out of Loom leaves (namespace.snapshot, erasure.export). The row is written
// before the first byte goes out, so a stream cut short is still on record.

// readAudit is one such read on record.
type readAudit struct {
	org, op, namespace, userID, actor string
	id                                uuid.UUID
	generation                        int64
}

func (s *Service) startAudit(ctx context.Context, a readAudit) error {
	// The row names its user by reference (loom.named_user): the org's key first.
	if _, err := s.termKeys.Key(ctx, a.org); err != nil {
		return fmt.Errorf("write the audit row: %w", err)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO loom.read_audit (org, id, op, namespace, user_id, generation, actor)
		VALUES ($1, $2, $3, $4, loom.named_user($1, $5), $6, $7)`, a.org, a.id, a.op, a.namespace, a.userID, a.generation, a.actor)
	if err != nil {
		return fmt.Errorf("write the audit row: %w", err)
	}
	return nil
}

// completeAudit records what the read sent: how many memories and the digest of the
// payload before its end line.
func (s *Service) completeAudit(ctx context.Context, a readAudit, end snapshot.End) error {
	_, err := s.pool.Exec(ctx, `UPDATE loom.read_audit SET rows = $3, sha256 = $4, completed_at = now() WHERE org = $1 AND id = $2`,
		a.org, a.id, end.Rows, end.SHA256)
	if err != nil {
		return fmt.Errorf("complete the audit row: %w", err)
	}
	return nil
}
