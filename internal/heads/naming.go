package heads

import (
	"context"
	"fmt"

	"github.com/loomplane/loom/internal/memrow"
)

// Naming reads up to limit heads of the scope that are not deleted, the newest
// written first; entity, unless empty, keeps those whose entities name it (in any
// case). Entities are text sealed at rest, so naming one opens the scope's rows.
func Naming(ctx context.Context, q Querier, sc Scope, entity string, limit int) ([]*memrow.Row, error) {
	rows, err := q.Query(ctx, `SELECT row FROM (SELECT `+Row+` AS row, seq FROM loom.memory_current
		WHERE `+scopeSQL+`) h
		WHERE $6 = '' OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(CASE jsonb_typeof(h.row->'entities')
			WHEN 'array' THEN h.row->'entities' ELSE '[]' END) e WHERE lower(e) = lower($6))
		ORDER BY seq DESC LIMIT $7`, sc.Org, sc.Namespace, sc.Agent, sc.UserID, sc.SessionID, entity, limit)
	if err != nil {
		return nil, fmt.Errorf("read the heads naming %q: %w", entity, err)
	}
	return Collect(rows)
}
