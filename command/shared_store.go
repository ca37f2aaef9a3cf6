package command

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loomplane/loom/internal/erasure"
	"github.com/loomplane/loom/internal/memrow"
)

// The statements of loom.shared: where each promoted row came from (migration 090).
// The promoted row itself is a head like any other; these rows index it by source.
// Keys, agents and sessions are stored by reference (migration 174): a read that needs
// a promoted row's clear key opens it from the row's head (the key is sealed in its
// text), which the record finds by the key's reference and the row's memory id. The
// record holds no sealed text of its own: every reader of a clear key goes on to act on
// the head (demote, redact), and when no head is left only the record is, which is
// forgotten by its reference.

// recordPromotion writes the promotion of row (stamped: its id and seq are the
// commit's) in the promotion's own transaction.
func recordPromotion(ctx context.Context, tx pgx.Tx, row *memrow.Row) error {
	pv := row.Shared
	if _, err := tx.Exec(ctx, `INSERT INTO loom.shared (org, namespace, memory_key, memory_id, seq, source_namespace, source_agent,
			source_user_id, source_session_id, source_key, source_memory_id, source_version, promoted_by, promoted_at)
		SELECT $1, $2, r.k, $4, $5, $6, r.w[2], loom.named_user($1, $8), r.w[3], r.w[1], $11, $12, $13, $14
		FROM (SELECT loom.key_ref($1, $3) AS k, loom.writer_refs($1, $10, $7, $9) AS w OFFSET 0) r
		ON CONFLICT (org, namespace, memory_key) DO UPDATE SET memory_id = EXCLUDED.memory_id, seq = EXCLUDED.seq,
			source_namespace = EXCLUDED.source_namespace, source_agent = EXCLUDED.source_agent, source_user_id = EXCLUDED.source_user_id,
			source_session_id = EXCLUDED.source_session_id, source_key = EXCLUDED.source_key, source_memory_id = EXCLUDED.source_memory_id,
			source_version = EXCLUDED.source_version, promoted_by = EXCLUDED.promoted_by, promoted_at = EXCLUDED.promoted_at,
			demoted_at = NULL, demoted_by = NULL`,
		row.Org, row.Namespace, row.MemoryKey, row.MemoryID, row.Seq, pv.SourceNamespace, pv.SourceAgent, pv.SourceUserID,
		pv.SourceSessionID, pv.SourceKey, pv.SourceMemoryID, pv.SourceVersion, pv.PromotedBy, pv.PromotedAt); err != nil {
		return fmt.Errorf("record the promotion: %w", err)
	}
	return nil
}

// recordDemotion marks the promotion of a key demoted, in the demote's transaction.
func recordDemotion(ctx context.Context, tx pgx.Tx, id memrow.Identity, actor string) error {
	if _, err := tx.Exec(ctx, `UPDATE loom.shared SET demoted_at = now(), demoted_by = $4
		WHERE org = $1 AND namespace = $2 AND memory_key = (SELECT loom.key_ref($1, $3))`, id.Org, id.Namespace, id.MemoryKey, actor); err != nil {
		return fmt.Errorf("record the demotion: %w", err)
	}
	return nil
}

// sharedCopy is a promoted row of another namespace whose source is in this one: its
// key as its head's sealed text holds it ("" when no head is left) and the key's
// reference, as the record stores it.
type sharedCopy struct{ namespace, key, ref string }

// openedSharedKey is the clear key of a loom.shared row (alias s), opened from the
// promoted row's head (the key is sealed in its text; a row sealed before migration
// 171 keeps it in its JSON, which loom.opened_row merges under it); empty when no head
// is left.
const openedSharedKey = `coalesce((SELECT loom.opened_row(c.row, c.sealed, c.org, c.namespace, c.seq) ->> 'memory_key' FROM loom.memory_current c
		WHERE c.org = s.org AND c.namespace = s.namespace AND c.memory_key = s.memory_key AND c.memory_id = s.memory_id), '')`

func scanSharedCopies(rows pgx.Rows) ([]sharedCopy, error) {
	defer rows.Close()
	var out []sharedCopy
	for rows.Next() {
		var c sharedCopy
		if err := rows.Scan(&c.namespace, &c.ref, &c.key); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// copiesPromotedFrom lists the live promotions into other namespaces whose source is
// namespace ns: what an erasure of ns takes with it.
func (s *Service) copiesPromotedFrom(ctx context.Context, org, ns string) ([]sharedCopy, error) {
	rows, err := s.pool.Query(ctx, `SELECT s.namespace, s.memory_key, `+openedSharedKey+` FROM loom.shared s
		WHERE s.org = $1 AND s.source_namespace = $2 AND s.namespace <> $2 ORDER BY s.namespace, s.memory_key`, org, ns)
	if err != nil {
		return nil, fmt.Errorf("read the copies promoted from %s: %w", ns, err)
	}
	out, err := scanSharedCopies(rows)
	if err != nil {
		return nil, fmt.Errorf("read the copies promoted from %s: %w", ns, err)
	}
	return out, nil
}

// promotedFromUser lists the promotions whose provenance names user userID as the
// source's writer (in one of namespaces, or anywhere in the org when namespaces is
// nil), and every promotion made on from one of them (cross_promote of a shared row):
// what an erasure of the user takes with it. Demoted ones are listed too: their
// versions still hold the text.
func (s *Service) promotedFromUser(ctx context.Context, org, userID string, namespaces []string) ([]sharedCopy, error) {
	rows, err := s.pool.Query(ctx, `WITH RECURSIVE taken AS (
			SELECT org, namespace, memory_key, memory_id FROM loom.shared
			WHERE org = $1 AND source_user_id = (SELECT loom.user_ref($1, $2)) AND ($3::text[] IS NULL OR source_namespace = ANY($3))
		UNION
			SELECT s.org, s.namespace, s.memory_key, s.memory_id FROM loom.shared s JOIN taken t ON s.source_memory_id = t.memory_id
			WHERE s.org = $1)
		SELECT s.namespace, s.memory_key, `+openedSharedKey+` FROM (SELECT DISTINCT * FROM taken) s ORDER BY s.namespace, s.memory_key`, org, userID, namespaces)
	if err != nil {
		return nil, fmt.Errorf("read the rows promoted from %s's memories: %w", userID, err)
	}
	out, err := scanSharedCopies(rows)
	if err != nil {
		return nil, fmt.Errorf("read the rows promoted from %s's memories: %w", userID, err)
	}
	return out, nil
}

// sharedTable names loom.shared where an erasure counts what it removed.
const sharedTable = "loom.shared"

// eraseShared deletes the promotions of an erasure's scope (args as
// erasure.ScopeParams names them).
func eraseShared(ctx context.Context, tx pgx.Tx, args []any) (int64, error) {
	tag, err := tx.Exec(ctx, erasure.ScopeParams+` DELETE FROM loom.shared t USING p WHERE `+pgScope(sharedTable), args...)
	return tag.RowsAffected(), err
}

// forgetPromotion deletes the record of a key's promotion, by the key's reference as
// the record stores it (a copy an erasure of its source withdrew).
func forgetPromotion(ctx context.Context, q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, org string, c sharedCopy) error {
	if _, err := q.Exec(ctx, `DELETE FROM loom.shared WHERE org = $1 AND namespace = $2 AND memory_key = $3`,
		org, c.namespace, c.ref); err != nil {
		return fmt.Errorf("forget the promotion: %w", err)
	}
	return nil
}
