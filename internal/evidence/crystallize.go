package evidence

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Uncrystallized reads, oldest first, up to limit turns of one user's session that
// memory.observe kept and no crystallization has read yet (observe.crystallize), as
// Turn rows (no key or sealed text) with their text opened.
func Uncrystallized(ctx context.Context, q Querier, s Scope, sessionID string, limit int) ([]Turn, []Opened, error) {
	rows, err := q.Query(ctx, `SELECT `+opened+`, e.seq FROM loom.memory_evidence e
		WHERE e.org = $1 AND e.namespace = $2 AND e.user_id = (SELECT loom.user_ref($1, $3)) AND e.session_id = (SELECT loom.session_ref($1, $4))
		  AND e.source = 'observe' AND e.crystallized_at IS NULL
		ORDER BY e.message_index, e.occurred_at LIMIT $5`, s.Org, s.Namespace, s.UserID, sessionID, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("read the session's observed turns: %w", err)
	}
	defer rows.Close()
	var turns []Turn
	var texts []Opened
	for rows.Next() {
		var o Opened
		var text string
		var seq int64
		if err := rows.Scan(&o.TurnID, &o.Agent, &o.UserID, &o.SessionRef, &o.Role, &o.MessageIndex, &o.OccurredAt, &text, &seq); err != nil {
			return nil, nil, err
		}
		if err := o.open(text); err != nil {
			return nil, nil, err
		}
		texts = append(texts, o)
		turns = append(turns, Turn{Org: s.Org, Namespace: s.Namespace, TurnID: o.TurnID, Agent: o.Agent, UserID: o.UserID,
			SessionID: o.SessionID, Role: o.Role, MessageIndex: o.MessageIndex, OccurredAt: o.OccurredAt, Seq: seq, Source: SourceObserve})
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read the session's observed turns: %w", err)
	}
	return turns, texts, nil
}

// ErrCrystallizedMeanwhile: another crystallization read some of the turns first.
var ErrCrystallizedMeanwhile = fmt.Errorf("another crystallization read some of the turns first")

// MarkCrystallized marks turns as read by a crystallization, refusing
// (ErrCrystallizedMeanwhile) when another marked any of them first: the caller's
// transaction then rolls back what it drew from them.
func MarkCrystallized(ctx context.Context, tx pgx.Tx, org, ns string, turnIDs []string) error {
	tag, err := tx.Exec(ctx, `UPDATE loom.memory_evidence SET crystallized_at = now()
		WHERE org = $1 AND namespace = $2 AND turn_id = ANY($3::uuid[]) AND crystallized_at IS NULL`, org, ns, turnIDs)
	if err != nil {
		return fmt.Errorf("mark the turns crystallized: %w", err)
	}
	if tag.RowsAffected() != int64(len(turnIDs)) {
		return ErrCrystallizedMeanwhile
	}
	return nil
}
