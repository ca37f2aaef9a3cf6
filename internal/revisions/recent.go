package revisions

import (
	"context"
	"fmt"

	"github.com/loomplane/loom/internal/heads"
)

// Scope narrows a namespace's revisions by identity: an empty Agent or UserID does not
// narrow.
type Scope struct {
	Org, Namespace, Agent, UserID string
}

// recentSQL walks the namespace's revisions newest first (its primary key, org,
// namespace, seq), so a scope's few newest cost the revisions since them; rows a
// redaction or an erasure destroyed are not read.
const recentSQL = `SELECT event_type, seq, ` + heads.Row + ` FROM loom.memory_revisions
	WHERE org = $1 AND namespace = $2 AND ($3 = '' OR agent = (SELECT loom.agent_ref($1, $3))) AND ($4 = '' OR user_id = (SELECT loom.user_ref($1, $4)))
	  AND row IS NOT NULL AND redacted_at IS NULL
	ORDER BY seq DESC LIMIT $5`

// Recent reads the scope's n newest revisions, newest first, each row opened.
func Recent(ctx context.Context, q Querier, sc Scope, n int) ([]Version, error) {
	rows, err := q.Query(ctx, recentSQL, sc.Org, sc.Namespace, sc.Agent, sc.UserID, n)
	if err != nil {
		return nil, fmt.Errorf("read the recent revisions: %w", err)
	}
	defer rows.Close()
	var vs []Version
	for rows.Next() {
		var v Version
		var seq int64
		var raw []byte
		if err := rows.Scan(&v.Event, &seq, &raw); err != nil {
			return nil, fmt.Errorf("read the recent revisions: %w", err)
		}
		if v.Row, err = heads.Decode(raw); err != nil {
			return nil, fmt.Errorf("read the recent revisions: %w", err)
		}
		vs = append(vs, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the recent revisions: %w", err)
	}
	return vs, nil
}
