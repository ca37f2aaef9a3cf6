package heads

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Dimensions Aggregate counts heads by.
const (
	ByType   = "type"
	ByStatus = "status"
	ByDay    = "day"
	ByTag    = "tag"
	ByEntity = "entity"
)

// aggregateParts are each dimension's count over the heads h; tags and entities are
// text sealed at rest, so only a count by them opens the rows.
var aggregateParts = map[string]string{
	ByType:   `SELECT 'type', h.row->>'memory_type', count(*) FROM h GROUP BY 2`,
	ByStatus: `SELECT 'status', h.row->>'status', count(*) FROM h GROUP BY 2`,
	ByDay:    `SELECT 'day', to_char((h.row->>'created_at')::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD'), count(*) FROM h GROUP BY 2`,
	ByTag: `SELECT 'tag', t, count(*) FROM h,
		jsonb_array_elements_text(CASE jsonb_typeof(h.row->'tags') WHEN 'array' THEN h.row->'tags' ELSE '[]' END) t GROUP BY 2`,
	ByEntity: `SELECT 'entity', e, count(*) FROM h,
		jsonb_array_elements_text(CASE jsonb_typeof(h.row->'entities') WHEN 'array' THEN h.row->'entities' ELSE '[]' END) e GROUP BY 2`,
}

// Aggregate counts the scope's live heads (not deleted, not past expires_at or
// valid_to), at most most of them, by each of dims: dimension → value → count, and
// the heads counted.
func Aggregate(ctx context.Context, q Querier, sc Scope, dims []string, most int) (map[string]map[string]int64, int64, error) {
	row := "c.row"
	parts := []string{`SELECT 'total', '', count(*) FROM h`}
	for _, d := range dims {
		part, ok := aggregateParts[d]
		if !ok {
			return nil, 0, fmt.Errorf("no dimension %q", d)
		}
		if d == ByTag || d == ByEntity {
			row = openedC
		}
		parts = append(parts, part)
	}
	sql := `WITH h AS MATERIALIZED (SELECT ` + row + ` AS row FROM loom.memory_current c
		WHERE ` + scopeSQL + `
		  AND (c.expires_at IS NULL OR c.expires_at > now())
		  AND (c.row->>'valid_to' IS NULL OR (c.row->>'valid_to')::timestamptz > now())
		LIMIT $6)
	` + strings.Join(parts, "\nUNION ALL ")
	rows, err := q.Query(ctx, sql, sc.Org, sc.Namespace, sc.Agent, sc.UserID, sc.SessionID, most)
	if err != nil {
		return nil, 0, fmt.Errorf("count the heads: %w", err)
	}
	out := map[string]map[string]int64{}
	var total int64
	var dim string
	var value *string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&dim, &value, &n}, func() error {
		if dim == "total" {
			total = n
			return nil
		}
		if out[dim] == nil {
			out[dim] = map[string]int64{}
		}
		v := ""
		if value != nil {
			v = *value
		}
		out[dim][v] += n
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("count the heads: %w", err)
	}
	return out, total, nil
}
