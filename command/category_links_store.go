package command

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/erasure"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
)

// The statements of loom.category_links (migration 116): which categories each key was
// linked to or rescinded from, beside the row's tags that carry the links. The key,
// agent and session are stored by reference (migration 174), bound through
// loom.writer_refs: links are read by the identities that name them (an import's
// writes), so no read needs them back.

// recordCategoryLinks records, in the commit of row's revision, the categories it links
// (bringing back a rescinded pair) and those it rescinds.
func recordCategoryLinks(ctx context.Context, tx pgx.Tx, row *memrow.Row, linked, rescinded []string, actor string) error {
	b := &pgx.Batch{}
	queueCategoryLinks(b, row, linked, rescinded, actor)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("record the category links: %w", err)
	}
	return nil
}

// queueCategoryLinks queues the statements of recordCategoryLinks.
func queueCategoryLinks(b *pgx.Batch, row *memrow.Row, linked, rescinded []string, actor string) {
	for _, c := range linked {
		b.Queue(`INSERT INTO loom.category_links (org, namespace, agent, user_id, session_id, memory_key, category, seq, linked_by)
			SELECT $1, $2, w[2], loom.named_user($1, $4), w[3], w[1], $7, $8, $9 FROM (SELECT loom.writer_refs($1, $6, $3, $5) AS w OFFSET 0) r
			ON CONFLICT (org, namespace, agent, user_id, session_id, memory_key, category) DO UPDATE SET seq = EXCLUDED.seq,
				linked_by = EXCLUDED.linked_by, linked_at = now(), rescinded_at = NULL, rescinded_by = NULL`,
			row.Org, row.Namespace, row.Agent, row.UserID, row.SessionID, row.MemoryKey, c, row.Seq, actor)
	}
	for _, c := range rescinded {
		b.Queue(`INSERT INTO loom.category_links (org, namespace, agent, user_id, session_id, memory_key, category, seq, linked_by,
				rescinded_at, rescinded_by)
			SELECT $1, $2, w[2], loom.named_user($1, $4), w[3], w[1], $7, $8, $9, now(), $9 FROM (SELECT loom.writer_refs($1, $6, $3, $5) AS w OFFSET 0) r
			ON CONFLICT (org, namespace, agent, user_id, session_id, memory_key, category) DO UPDATE SET seq = EXCLUDED.seq,
				rescinded_at = now(), rescinded_by = EXCLUDED.rescinded_by`,
			row.Org, row.Namespace, row.Agent, row.UserID, row.SessionID, row.MemoryKey, c, row.Seq, actor)
	}
}

// categoryLink is one stored pair of an identity's key and a category.
type categoryLink struct {
	id       string // heads.IdentityKey of the key's identity
	category string
}

// readCategoryLinks reads the stored pairs of the identities ids (an import's writes)
// of the subject's (base's agent and user), each with whether its owner rescinded it.
func readCategoryLinks(ctx context.Context, q heads.Querier, base memrow.Identity, ids []memrow.Identity) (map[categoryLink]bool, error) {
	sessions, keys := make([]string, len(ids)), make([]string, len(ids))
	for i, id := range ids {
		sessions[i], keys[i] = id.SessionID, id.MemoryKey
	}
	rows, err := q.Query(ctx, `SELECT k.i, l.category, l.rescinded_at IS NOT NULL
		FROM unnest((SELECT loom.session_refs($1, $5)), (SELECT loom.key_refs($1, $6))) WITH ORDINALITY AS k(session_id, memory_key, i)
		JOIN loom.category_links l ON l.org = $1 AND l.namespace = $2 AND l.agent = (SELECT loom.agent_ref($1, $3))
			AND l.user_id = (SELECT loom.user_ref($1, $4)) AND l.session_id = k.session_id AND l.memory_key = k.memory_key`,
		base.Org, base.Namespace, base.Agent, base.UserID, sessions, keys)
	if err != nil {
		return nil, fmt.Errorf("read the keys' category links: %w", err)
	}
	out := map[categoryLink]bool{}
	for rows.Next() {
		var i int
		var category string
		var rescinded bool
		if err := rows.Scan(&i, &category, &rescinded); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read the keys' category links: %w", err)
		}
		out[categoryLink{heads.IdentityKey(ids[i-1]), category}] = rescinded
	}
	return out, rows.Err()
}

// categoryLinksTable names loom.category_links where an erasure counts what it removed.
const categoryLinksTable = "loom.category_links"

// eraseCategoryLinks deletes the links of an erasure's scope (args as
// erasure.ScopeParams names them).
func eraseCategoryLinks(ctx context.Context, tx pgx.Tx, args []any) (int64, error) {
	tag, err := tx.Exec(ctx, erasure.ScopeParams+` DELETE FROM loom.category_links t USING p WHERE `+pgScope(categoryLinksTable), args...)
	return tag.RowsAffected(), err
}
