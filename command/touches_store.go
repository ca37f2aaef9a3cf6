package command

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
)

// loom.memory_touches: memory.touch's counts (touch.go), search's served hits (the
// recalls column: query/recalls_store.go, the one statement of the table outside this
// file) and evidence events, until the usage publication takes them out into a
// memory.usage_recorded record (usage_publish.go).

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

// usageDue is which rows of loom.memory_touches a publication takes: every row that
// counts a touch or an evidence event, and a row of search recalls alone once its first
// recall is $recallAge (seconds) old. A search workload serves the same memories
// again and again, and each publication of a memory's count is a usage_fold revision of
// it (a commit, a record on the topic, its projection and index apply): published every
// LOOM_USAGE_PUBLISH_INTERVAL_MS, the recalls of the memories a search benchmark
// served were 399 revisions in 22 s. Held for LOOM_USAGE_RECALL_INTERVAL_MS, a memory's
// recalls are one revision per that interval however often it is served; recall_count is
// reported, not ranked, so it may lag that long. A touch or evidence event on the row
// takes its recalls along at once.
const usageDue = `(touches > 0 OR evidence > 0 OR first_at <= now() - $%d::float8 * interval '1 second')`

// usageNamespaces lists up to limit namespaces with usage due, those counted longest
// ago first.
func (s *Service) usageNamespaces(ctx context.Context, limit int) ([][2]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT org, namespace FROM loom.memory_touches WHERE `+fmt.Sprintf(usageDue, 2)+`
		GROUP BY org, namespace ORDER BY min(first_at) LIMIT $1`, limit, s.cfg.RecallPublishInterval.Seconds())
	if err != nil {
		return nil, fmt.Errorf("list the namespaces with usage counted: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var sp [2]string
		return sp, r.Scan(&sp[0], &sp[1])
	})
}

// takeUsage takes up to limit memories' counts of a namespace that are due (usageDue,
// recalls alone once recallAge old) out of the table, in tx (the transaction that
// queues their record), those counted longest ago first.
func takeUsage(ctx context.Context, tx pgx.Tx, org, ns string, limit int, recallAge time.Duration) ([]events.UsageItem, error) {
	// The rows to take are chosen once, in a materialized CTE: as a subquery joined to the
	// DELETE, a concurrent touch's update made Postgres re-check the join and take rows
	// past the limit (1,338 for a limit of 1,000 under searches), a record the topic
	// contract refuses, retried for ever. A row a count holds locked is left for the next
	// round (SKIP LOCKED): waiting for it held the namespace's generation lock, and a
	// recall flush upserting in another order deadlocked with the take (SQLSTATE 40P01),
	// stalling the namespace's commits until Postgres broke the cycle.
	rows, err := tx.Query(ctx, `WITH p AS MATERIALIZED (SELECT memory_id FROM loom.memory_touches
			WHERE org = $1 AND namespace = $2 AND `+fmt.Sprintf(usageDue, 4)+` ORDER BY first_at LIMIT $3 FOR UPDATE SKIP LOCKED)
		DELETE FROM loom.memory_touches t USING p
		WHERE t.org = $1 AND t.namespace = $2 AND t.memory_id = p.memory_id
		RETURNING t.memory_id::text, t.touches, t.recalls, t.evidence`, org, ns, limit, recallAge.Seconds())
	if err != nil {
		return nil, fmt.Errorf("take the counted usage: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (events.UsageItem, error) {
		var it events.UsageItem
		return it, r.Scan(&it.MemoryID, &it.Touches, &it.Recalls, &it.Evidence)
	})
	if err != nil {
		return nil, fmt.Errorf("take the counted usage: %w", err)
	}
	if len(items) > limit {
		// Rolled back with the transaction: the counts stay for the next round.
		return nil, fmt.Errorf("take the counted usage: %d memories taken, at most %d", len(items), limit)
	}
	out := items[:0]
	for _, it := range items {
		if it.Touches > 0 || it.Recalls > 0 || it.Evidence > 0 {
			out = append(out, it)
		}
	}
	return out, nil
}
