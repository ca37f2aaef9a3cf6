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
// linked to or rescinded from, beside the row's tags that carry the links.

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
			VALUES ($1, $2, $3, loom.named_user($1, $4), $5, $6, $7, $8, $9)
			ON CONFLICT (org, namespace, agent, user_id, session_id, memory_key, category) DO UPDATE SET seq = EXCLUDED.seq,
				linked_by = EXCLUDED.linked_by, linked_at = now(), rescinded_at = NULL, rescinded_by = NULL`,
			row.Org, row.Namespace, row.Agent, row.UserID, row.SessionID, row.MemoryKey, c, row.Seq, actor)
	}
	for _, c := range rescinded {
		b.Queue(`INSERT INTO loom.category_links (org, namespace, agent, user_id, session_id, memory_key, category, seq, linked_by,
				rescinded_at, rescinded_by)
			VALUES ($1, $2, $3, loom.named_user($1, $4), $5, $6, $7, $8, $9, now(), $9)
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

// readCategoryLinks reads the stored pairs of the subject's keys (agent and user, in
// any session), each with whether its owner rescinded it.
func readCategoryLinks(ctx context.Context, q heads.Querier, org, ns, agent, userID string, keys []string) (map[categoryLink]bool, error) {
	rows, err := q.Query(ctx, `SELECT session_id, memory_key, category, rescinded_at IS NOT NULL FROM loom.category_links
		WHERE org = $1 AND namespace = $2 AND agent = $3 AND user_id = (SELECT loom.user_ref($1, $4)) AND memory_key = ANY($5)`, org, ns, agent, userID, keys)
	if err != nil {
		return nil, fmt.Errorf("read the keys' category links: %w", err)
	}
	out := map[categoryLink]bool{}
	for rows.Next() {
		id := memrow.Identity{Org: org, Namespace: ns, Agent: agent, UserID: userID}
		var category string
		var rescinded bool
		if err := rows.Scan(&id.SessionID, &id.MemoryKey, &category, &rescinded); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read the keys' category links: %w", err)
		}
		out[categoryLink{heads.IdentityKey(id), category}] = rescinded
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
