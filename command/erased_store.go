package command

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/heads"
)

// The write side's reads of the deletion evidence (loom.erased_memories and
// loom.erasure_ledger) around a commit; the erasure saga writes it (erasure_postgres.go).

// erasedAmong reports whether an erasure removed any of the memories from the
// namespace within the evidence's lifetime (LOOM_PG_ERASURE_EVIDENCE_HOURS).
func (s *Service) erasedAmong(ctx context.Context, q heads.Querier, org, namespace string, ids []string) (bool, error) {
	erased, err := s.erasedIn(ctx, q, org, []string{namespace}, ids)
	return len(erased) > 0, err
}

// erasedIn returns those of the memories an erasure removed from any of the
// namespaces within the evidence's lifetime.
func (s *Service) erasedIn(ctx context.Context, q heads.Querier, org string, namespaces, ids []string) (map[string]bool, error) {
	uuids := parseIDs(ids)
	if len(uuids) == 0 {
		return nil, nil
	}
	rows, err := q.Query(ctx, `SELECT DISTINCT memory_id::text FROM loom.erased_memories
		WHERE org = $1 AND namespace = ANY($2) AND memory_id = ANY($3) AND erased_at > now() - $4::interval`,
		org, namespaces, uuids, s.cfg.Erasure.Evidence.String())
	if err != nil {
		return nil, fmt.Errorf("read the deletion evidence: %w", err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read the deletion evidence: %w", err)
	}
	erased := make(map[string]bool, len(found))
	for _, id := range found {
		erased[id] = true
	}
	return erased, nil
}

// queueErasedInGap queues whether an erasure whose fence lies after seq (one the write's
// verdict did not see) removed any of the memories from the namespace. Links to a
// memory erased before are left alone: no verdict since could have chosen them, and a
// copy that carries one was read after it.
func (s *Service) queueErasedInGap(b *pgx.Batch, org, namespace string, ids []string, after int64, erased *bool) {
	uuids := parseIDs(ids)
	if len(uuids) == 0 {
		return
	}
	b.Queue(`SELECT EXISTS (SELECT 1 FROM loom.erased_memories e
		JOIN loom.erasure_ledger l ON l.org = e.org AND l.id = e.erasure_id
		WHERE e.org = $1 AND e.namespace = $2 AND e.memory_id = ANY($3) AND (l.fences ->> $2)::bigint > $4)`,
		org, namespace, uuids, after).QueryRow(func(r pgx.Row) error {
		if err := r.Scan(erased); err != nil {
			return fmt.Errorf("read the deletion evidence of the gap: %w", err)
		}
		return nil
	})
}

// parseIDs keeps the ids that are UUIDs.
func parseIDs(ids []string) []uuid.UUID {
	var out []uuid.UUID
	for _, id := range ids {
		if u, err := uuid.Parse(id); err == nil {
			out = append(out, u)
		}
	}
	return out
}
