package command

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// loom.memory_touches: memory.touch's counts (touch.go), search's served hits (the
// recalls column: query/recalls_store.go, the one statement of the table outside this
// file) and the usage fold's reads and subtractions (workers/usage_fold.go through the
// worker API).

// recordTouch counts one touch of a memory.
func (s *Service) recordTouch(ctx context.Context, org, ns, memoryID string) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO loom.memory_touches (org, namespace, memory_id, touches) VALUES ($1, $2, $3, 1)
		ON CONFLICT (org, namespace, memory_id) DO UPDATE SET touches = loom.memory_touches.touches + 1, last_at = now()`,
		org, ns, memoryID)
	if err != nil {
		return fmt.Errorf("count the touch: %w", err)
	}
	return nil
}

// recordEvidence counts one evidence event of a memory (evidence.go).
func (s *Service) recordEvidence(ctx context.Context, org, ns, memoryID string) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO loom.memory_touches (org, namespace, memory_id, touches, evidence) VALUES ($1, $2, $3, 0, 1)
		ON CONFLICT (org, namespace, memory_id) DO UPDATE SET evidence = loom.memory_touches.evidence + 1, last_at = now()`,
		org, ns, memoryID)
	if err != nil {
		return fmt.Errorf("count the evidence: %w", err)
	}
	return nil
}

// TouchedMemory is a memory with touches not yet folded.
type TouchedMemory struct {
	Org, Namespace, MemoryID string
	Touches                  int
	Recalls                  int // hits search served
	Evidence                 int // evidence events: restatements, merges, duplicates
}

// ClaimTouches leases up to limit memories with touches to fold, oldest first, for
// lease; a pass that dies leaves them to the next after it.
func (s *Service) ClaimTouches(ctx context.Context, limit int, lease time.Duration) ([]TouchedMemory, error) {
	rows, err := s.pool.Query(ctx, `UPDATE loom.memory_touches t SET lease_until = now() + $2::interval
		FROM (SELECT org, namespace, memory_id FROM loom.memory_touches
			WHERE (touches > 0 OR recalls > 0 OR evidence > 0) AND (lease_until IS NULL OR lease_until < now())
			ORDER BY first_at LIMIT $1 FOR UPDATE SKIP LOCKED) p
		WHERE t.org = p.org AND t.namespace = p.namespace AND t.memory_id = p.memory_id
		RETURNING t.org, t.namespace, t.memory_id::text, t.touches, t.recalls, t.evidence`, limit, lease.String())
	if err != nil {
		return nil, fmt.Errorf("claim the touches to fold: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (TouchedMemory, error) {
		var m TouchedMemory
		return m, r.Scan(&m.Org, &m.Namespace, &m.MemoryID, &m.Touches, &m.Recalls, &m.Evidence)
	})
}

// FoldTouches takes n folded touches and m's recalls and evidence off a memory's
// counts, in the transaction that commits them (tx), and forgets counts folded whole.
func FoldTouches(ctx context.Context, tx pgx.Tx, m TouchedMemory, n int) error {
	if _, err := tx.Exec(ctx, `UPDATE loom.memory_touches SET touches = greatest(touches - $4, 0), recalls = greatest(recalls - $5, 0),
			evidence = greatest(evidence - $6, 0), lease_until = NULL
		WHERE org = $1 AND namespace = $2 AND memory_id = $3`, m.Org, m.Namespace, m.MemoryID, n, m.Recalls, m.Evidence); err != nil {
		return fmt.Errorf("take the folded touches off: %w", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM loom.memory_touches WHERE org = $1 AND namespace = $2 AND memory_id = $3
			AND touches = 0 AND recalls = 0 AND evidence = 0`,
		m.Org, m.Namespace, m.MemoryID); err != nil {
		return fmt.Errorf("forget the folded touches: %w", err)
	}
	return nil
}

// DropTouches forgets a memory's touches: its row is gone or no longer served.
func (s *Service) DropTouches(ctx context.Context, m TouchedMemory) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM loom.memory_touches WHERE org = $1 AND namespace = $2 AND memory_id = $3`,
		m.Org, m.Namespace, m.MemoryID)
	if err != nil {
		return fmt.Errorf("forget the touches: %w", err)
	}
	return nil
}

// ReleaseTouches gives a claimed memory's touches back, due again after delay.
func (s *Service) ReleaseTouches(ctx context.Context, m TouchedMemory, delay time.Duration) error {
	_, err := s.pool.Exec(ctx, `UPDATE loom.memory_touches SET lease_until = now() + $4::interval
		WHERE org = $1 AND namespace = $2 AND memory_id = $3`, m.Org, m.Namespace, m.MemoryID, delay.String())
	if err != nil {
		return fmt.Errorf("give the touches back: %w", err)
	}
	return nil
}

// OwedTouches counts the memories whose touches wait to be folded.
func (s *Service) OwedTouches(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM loom.memory_touches WHERE touches > 0 OR recalls > 0 OR evidence > 0`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the touches owed: %w", err)
	}
	return n, nil
}
