package command

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/loomplane/loom/internal/erasure"
	"github.com/loomplane/loom/internal/heads"
)

// The statements of the deletion evidence, loom.erased_memories (and the knowledge
// plane's loom.erased_documents, which knowledge/store reads): the commit's reads
// (with the ledger's fences, loom.erasure_ledger), and the erasure saga's record of it,
// its quiet mark and its sweep.

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

// erasedSince reads the users an erasure removed from any of the namespaces (or from
// the whole org) within the evidence's lifetime, and whether one erased any of the
// namespaces whole: the restore of a conversation's record leaves their turns out.
func (s *Service) erasedSince(ctx context.Context, q heads.Querier, org string, namespaces []string) (map[string]bool, bool, error) {
	rows, err := q.Query(ctx, `SELECT scope->>'kind', loom.ledger_user(org, scope) FROM loom.erasure_ledger
		WHERE org = $1 AND requested_at > now() - $2::interval
		  AND (scope->>'kind' = $3 OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(coalesce(scope->'namespaces', '[]')) n
			WHERE n = ANY($4)))`, org, s.cfg.Erasure.Evidence.String(), scopeUserInOrg, namespaces)
	if err != nil {
		return nil, false, fmt.Errorf("read the erasures: %w", err)
	}
	defer rows.Close()
	users := map[string]bool{}
	whole := false
	for rows.Next() {
		var kind, user string
		if err := rows.Scan(&kind, &user); err != nil {
			return nil, false, fmt.Errorf("read the erasures: %w", err)
		}
		if kind == scopeNamespaces {
			whole = true
		} else if user != "" {
			users[user] = true
		}
	}
	return users, whole, rows.Err()
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

// queueRecordErased queues the evidence that erasure erasureID removed the memories ids
// from the namespace.
func queueRecordErased(b *pgx.Batch, org, ns string, ids []string, erasureID string) {
	b.Queue(`INSERT INTO loom.erased_memories (org, namespace, memory_id, erasure_id)
		SELECT $1, $2, id::uuid, $4 FROM unnest($3::text[]) AS id
		ON CONFLICT (org, namespace, memory_id) DO UPDATE SET erasure_id = EXCLUDED.erasure_id, erased_at = now(), quiet_at = NULL`,
		org, ns, ids, erasureID)
}

// queueRecordErasedDocuments queues the evidence of every version of the knowledge
// documents in an erasure's scope (args as erasure.ScopeParams names them), read from
// the revisions before the step deletes them: a knowledge commit built from one is
// refused (404), and the answers naming one are fenced (internal/idempotency).
func queueRecordErasedDocuments(b *pgx.Batch, args []any) {
	b.Queue(erasure.ScopeParams+` INSERT INTO loom.erased_documents (org, namespace, source_uri, version, doc_id, erasure_id)
		SELECT t.org, t.namespace, t.source_uri, t.version, t.doc_id, p.erasure FROM loom.knowledge_revisions t, p
		WHERE `+pgScope("loom.knowledge_revisions")+`
		ON CONFLICT (org, namespace, source_uri, version) DO UPDATE SET doc_id = coalesce(EXCLUDED.doc_id, erased_documents.doc_id),
			erasure_id = EXCLUDED.erasure_id, erased_at = now()`, args...)
}

// markErasedQuiet records when an erasure's publishers were quiet on its evidence.
func (s *Service) markErasedQuiet(ctx context.Context, erasureID string) error {
	_, err := s.pool.Exec(ctx, `UPDATE loom.erased_memories SET quiet_at = now() WHERE erasure_id = $1 AND quiet_at IS NULL`, erasureID)
	return err
}

// sweepErasedEvidence deletes deletion evidence past LOOM_PG_ERASURE_EVIDENCE_HOURS, a
// few thousand rows a pass.
func (s *Service) sweepErasedEvidence(ctx context.Context) error {
	for _, table := range []string{"loom.erased_memories", "loom.erased_documents"} {
		if _, err := s.pool.Exec(ctx, `DELETE FROM `+table+` WHERE ctid IN (
			SELECT ctid FROM `+table+` WHERE erased_at < now() - $1::interval LIMIT 5000)`, s.cfg.Erasure.Evidence.String()); err != nil {
			return fmt.Errorf("sweep %s: %w", table, err)
		}
	}
	return nil
}

// parseIDs keeps the ids that are UUIDs, as pgx encodes a uuid[] directly: a
// []uuid.UUID went through driver.Valuer, a string parsed back, and an encode error
// built for each element (~2 µs an id).
func parseIDs(ids []string) []pgtype.UUID {
	var out []pgtype.UUID
	for _, id := range ids {
		if u, err := uuid.Parse(id); err == nil {
			out = append(out, pgtype.UUID{Bytes: u, Valid: true})
		}
	}
	return out
}
