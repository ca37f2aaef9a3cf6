package heads

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Inventory is a namespace's live heads counted (namespace.inventory): by type, by
// status, by user and by tag. Deleted and expired heads are counted apart.
type Inventory struct {
	Live     int64            `json:"live"`
	Deleted  int64            `json:"deleted"`
	Expired  int64            `json:"expired"`
	ByType   map[string]int64 `json:"by_type"`
	ByStatus map[string]int64 `json:"by_status"`
	ByUser   map[string]int64 `json:"by_user"`
	ByTag    map[string]int64 `json:"by_tag"`
}

// liveHead is the predicate of a live head of loom.memory_current (alias c).
const liveHead = `NOT (c.row->>'tombstone')::boolean AND (c.expires_at IS NULL OR c.expires_at > now())
	AND (c.row->>'valid_to' IS NULL OR (c.row->>'valid_to')::timestamptz > now())`

// CountInventory counts a namespace's heads (userID's alone unless it is empty), and
// the tags of at most tagSample live heads (a tag is in the sealed text: each is opened).
func CountInventory(ctx context.Context, q interface {
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}, org, namespace, userID string, tagSample int) (*Inventory, error) {
	inv := &Inventory{ByType: map[string]int64{}, ByStatus: map[string]int64{}, ByUser: map[string]int64{}, ByTag: map[string]int64{}}
	b := &pgx.Batch{}
	// Grouped by the reference and named after: a name is opened once a group, not once a head.
	b.Queue(`SELECT g.typ, g.status, loom.user_name($1, g.user_id), g.state, g.n FROM (
			SELECT c.row->>'memory_type' AS typ, c.row->>'status' AS status, c.user_id,
				CASE WHEN (c.row->>'tombstone')::boolean THEN 'deleted' WHEN `+liveHead+` THEN 'live' ELSE 'expired' END AS state, count(*) AS n
			FROM loom.memory_current c WHERE c.org = $1 AND c.namespace = $2 AND ($3 = '' OR c.user_id = (SELECT loom.user_ref($1, $3)))
			GROUP BY 1, 2, 3, 4) g`, org, namespace, userID).Query(func(rows pgx.Rows) error {
		var typ, status, user, state string
		var n int64
		_, err := pgx.ForEachRow(rows, []any{&typ, &status, &user, &state, &n}, func() error {
			switch state {
			case "deleted":
				inv.Deleted += n
			case "expired":
				inv.Expired += n
			default:
				inv.Live += n
				inv.ByType[typ] += n
				inv.ByStatus[status] += n
				inv.ByUser[user] += n
			}
			return nil
		})
		return err
	})
	b.Queue(`SELECT t, count(*) FROM (SELECT `+RowOf("c")+` AS row FROM loom.memory_current c
			WHERE c.org = $1 AND c.namespace = $2 AND ($3 = '' OR c.user_id = (SELECT loom.user_ref($1, $3))) AND `+liveHead+` LIMIT $4) h,
			jsonb_array_elements_text(CASE jsonb_typeof(h.row -> 'tags') WHEN 'array' THEN h.row -> 'tags' ELSE '[]' END) t
		GROUP BY t`, org, namespace, userID, tagSample).Query(func(rows pgx.Rows) error {
		var tag string
		var n int64
		_, err := pgx.ForEachRow(rows, []any{&tag, &n}, func() error { inv.ByTag[tag] = n; return nil })
		return err
	})
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("count the namespace's heads: %w", err)
	}
	return inv, nil
}
