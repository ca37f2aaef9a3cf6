package evidence

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Opened is a kept turn, its text opened.
type Opened struct {
	TurnID       string
	Agent        string
	UserID       string
	SessionID    string
	Role         string
	Speaker      string
	MessageIndex int
	OccurredAt   time.Time
	Text         string
}

// opened selects a row's columns with its text opened (alias e).
const opened = `e.turn_id::text, e.agent, e.user_id, e.session_id, e.role, e.message_index, e.occurred_at,
	convert_from(decrypt(e.sealed, hmac('loom.turn'::bytea, loom.unwrapped_key(e.data_key), 'sha256'), 'aes'), 'UTF8')`

func collect(rows pgx.Rows, err error) ([]Opened, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Opened
	for rows.Next() {
		var o Opened
		var text string
		if err := rows.Scan(&o.TurnID, &o.Agent, &o.UserID, &o.SessionID, &o.Role, &o.MessageIndex, &o.OccurredAt, &text); err != nil {
			return nil, err
		}
		if err := o.open(text); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// open decodes a row's opened text and speaker.
func (o *Opened) open(text string) error {
	var st sealedText
	if err := json.Unmarshal([]byte(text), &st); err != nil {
		return fmt.Errorf("decode turn %s: %w", o.TurnID, err)
	}
	o.Text, o.Speaker = st.Text, st.Speaker
	return nil
}

// Scope is what a read reaches: one namespace, and one user's turns or every user's
// ("").
type Scope struct {
	Org, Namespace, UserID string
}

// Recent reads the scope's most recent turns, at most limit, newest first: the turns a
// query's lexical match runs over.
func Recent(ctx context.Context, q Querier, s Scope, limit int) ([]Opened, error) {
	out, err := collect(q.Query(ctx, `SELECT `+opened+` FROM loom.memory_evidence e
		WHERE e.org = $1 AND e.namespace = $2 AND ($3 = '' OR e.user_id = $3)
		ORDER BY e.occurred_at DESC, e.message_index DESC LIMIT $4`, s.Org, s.Namespace, s.UserID, limit))
	if err != nil {
		return nil, fmt.Errorf("read the recent turns: %w", err)
	}
	return out, nil
}

// Window reads turns of one user's session with indexes from..to, oldest first.
func Window(ctx context.Context, q Querier, s Scope, sessionID string, from, to int) ([]Opened, error) {
	out, err := collect(q.Query(ctx, `SELECT `+opened+` FROM loom.memory_evidence e
		WHERE e.org = $1 AND e.namespace = $2 AND e.user_id = $3 AND e.session_id = $4
		  AND e.message_index BETWEEN $5 AND $6
		ORDER BY e.message_index, e.occurred_at`, s.Org, s.Namespace, s.UserID, sessionID, from, to))
	if err != nil {
		return nil, fmt.Errorf("read the session's window: %w", err)
	}
	return out, nil
}

// Last reads the last n turns of a session (every user's of it when s.UserID is
// ""), oldest first.
func Last(ctx context.Context, q Querier, s Scope, sessionID string, n int) ([]Opened, error) {
	out, err := collect(q.Query(ctx, `SELECT * FROM (SELECT `+opened+` FROM loom.memory_evidence e
		WHERE e.org = $1 AND e.namespace = $2 AND ($3 = '' OR e.user_id = $3) AND e.session_id = $4
		ORDER BY e.message_index DESC, e.occurred_at DESC LIMIT $5) t ORDER BY 6, 7`,
		s.Org, s.Namespace, s.UserID, sessionID, n))
	if err != nil {
		return nil, fmt.Errorf("read the session's last turns: %w", err)
	}
	return out, nil
}

// SourcesOf reads the turns memory versions were drawn from, by memory id, every
// version's: memory id → turns, in session order.
func SourcesOf(ctx context.Context, q Querier, s Scope, memoryIDs []string) (map[string][]Opened, error) {
	rows, err := q.Query(ctx, `SELECT DISTINCT ON (l.memory_id, e.turn_id) l.memory_id::text, `+opened+`
		FROM loom.memory_belief_sources l
		JOIN loom.memory_evidence e ON e.org = l.org AND e.namespace = l.namespace AND e.turn_id = l.turn_id
		WHERE l.org = $1 AND l.namespace = $2 AND l.memory_id = ANY($3::uuid[]) AND ($4 = '' OR e.user_id = $4)`,
		s.Org, s.Namespace, memoryIDs, s.UserID)
	if err != nil {
		return nil, fmt.Errorf("read the memories' sources: %w", err)
	}
	defer rows.Close()
	out := map[string][]Opened{}
	for rows.Next() {
		var id, text string
		var o Opened
		if err := rows.Scan(&id, &o.TurnID, &o.Agent, &o.UserID, &o.SessionID, &o.Role, &o.MessageIndex, &o.OccurredAt, &text); err != nil {
			return nil, fmt.Errorf("read the memories' sources: %w", err)
		}
		var st sealedText
		if err := json.Unmarshal([]byte(text), &st); err != nil {
			return nil, fmt.Errorf("decode turn %s: %w", o.TurnID, err)
		}
		o.Text, o.Speaker = st.Text, st.Speaker
		out[id] = append(out[id], o)
	}
	return out, rows.Err()
}
