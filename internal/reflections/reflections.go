// Package reflections holds the reflection_distill pass's rules and every statement of
// loom.session_outcomes (memory-architecture, "Background passes", reflection_distill:
// recent sessions without an outcome get an outcome label, then reflection memories
// hidden from unfiltered recall). The workers' pass reads the owed sessions here and
// writes through the worker API (command.KeepReflection), which runs KeepOutcome in
// the commit of the reflection row.
package reflections

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/evidence"
	"github.com/loomplane/loom/internal/memrow"
)

// MemoryType is a reflection row's type: memrow.HiddenTypes keeps it out of a search
// that does not ask for it by type.
const MemoryType = "reflection"

// Actor is who writes the reflection rows.
const Actor = "worker:reflection_distill"

// KeyPrefix leads a reflection row's key: reflection:<session>.
const KeyPrefix = "reflection:"

// Outcomes a session is labelled with.
var Outcomes = []string{"achieved", "failed", "mixed", "unclear"}

// Identity is the reflection row of a user's session: the user's, in the session,
// agent "-".
func Identity(org, namespace, userID, sessionID string) memrow.Identity {
	return memrow.Identity{Org: org, Namespace: namespace, Agent: memrow.DefaultIdentity, UserID: userID,
		SessionID: sessionID, MemoryKey: KeyPrefix + sessionID}
}

// Querier is what the reads run on.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// OptedIn is a namespace configuration that opts in (reflection_distill: true).
const OptedIn = `config @> '{"reflection_distill": true}' AND deleted_at IS NULL`

// Owed is a user's session that owes an outcome: its turns up to LastIndex are not
// labelled.
type Owed struct {
	Org, Namespace, UserID, SessionID string
	LastIndex                         int
}

// Owing is when a session owes an outcome: it has a turn written since Since, its last
// turn was written before IdleBefore (the session is over for now), and no label
// covers that turn.
type Owing struct {
	Since, IdleBefore time.Time
	// Org and Namespace, when Namespace is set, keep to that namespace's sessions.
	Org, Namespace string
}

// owedSessions selects the owed sessions of the namespaces that opt in; an org whose
// erasure runs is left out (its turns are being deleted).
var owedSessions = `WITH recent AS (
		SELECT DISTINCT e.org, e.namespace, e.user_id, e.session_id FROM loom.memory_evidence e
		JOIN loom.namespaces n ON n.org = e.org AND n.namespace = e.namespace AND n.` + OptedIn + `
		WHERE e.created_at >= $1 AND ($4::text = '' OR (e.org = $3 AND e.namespace = $4))),
	sessions AS (
		SELECT r.org, r.namespace, r.user_id, r.session_id, t.message_index AS last_index, t.created_at AS last_at,
			t.data_key AS last_key, t.sealed AS last_sealed
		FROM recent r
		CROSS JOIN LATERAL (SELECT e.message_index, e.created_at, e.data_key, e.sealed FROM loom.memory_evidence e
			WHERE e.org = r.org AND e.namespace = r.namespace AND e.user_id = r.user_id AND e.session_id = r.session_id
			ORDER BY e.message_index DESC, e.occurred_at DESC LIMIT 1) t
		WHERE NOT EXISTS (SELECT 1 FROM loom.erasure_ledger l WHERE l.org = r.org AND l.status = 'running'))
	SELECT s.org, s.namespace, loom.user_name(s.org, s.user_id), ` + evidence.SessionOpened("s.last_key", "s.last_sealed") + `,
		s.last_index, s.last_at FROM sessions s
	WHERE s.last_at < $2 AND NOT EXISTS (SELECT 1 FROM loom.session_outcomes o WHERE o.org = s.org AND o.namespace = s.namespace
		AND o.user_id = s.user_id AND o.session_id = s.session_id AND o.window_end >= s.last_index)`

// OwedSessions reads up to limit sessions that owe an outcome, the longest quiet first.
func OwedSessions(ctx context.Context, q Querier, o Owing, limit int) ([]Owed, error) {
	rows, err := q.Query(ctx, owedSessions+` ORDER BY s.last_at LIMIT $5`, o.Since, o.IdleBefore, o.Org, o.Namespace, limit)
	if err != nil {
		return nil, fmt.Errorf("read the sessions owing an outcome: %w", err)
	}
	defer rows.Close()
	var out []Owed
	for rows.Next() {
		var s Owed
		var at time.Time
		if err := rows.Scan(&s.Org, &s.Namespace, &s.UserID, &s.SessionID, &s.LastIndex, &at); err != nil {
			return nil, fmt.Errorf("read the sessions owing an outcome: %w", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// Labelled is whether a label now covers the owed session's last turn: a pass that
// read it owed checks again under its claim, as another process's pass may have
// labelled it in between.
func Labelled(ctx context.Context, q Querier, o Owed) (bool, error) {
	var done bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM loom.session_outcomes WHERE org = $1 AND namespace = $2
		AND user_id = (SELECT loom.user_ref($1, $3)) AND session_id = (SELECT loom.session_ref($1, $4)) AND window_end >= $5)`, o.Org, o.Namespace, o.UserID, o.SessionID, o.LastIndex).Scan(&done)
	if err != nil {
		return false, fmt.Errorf("read whether the session is labelled: %w", err)
	}
	return done, nil
}

// CountOwed counts the sessions that owe an outcome.
func CountOwed(ctx context.Context, q Querier, o Owing) (int64, error) {
	var n int64
	if err := q.QueryRow(ctx, `SELECT count(*) FROM (`+owedSessions+`) o`, o.Since, o.IdleBefore, o.Org, o.Namespace).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the sessions owing an outcome: %w", err)
	}
	return n, nil
}

// Outcome is a session's label as the pass keeps it.
type Outcome struct {
	Org, Namespace, UserID, SessionID string
	WindowEnd                         int // the message index of the last turn the label read
	Outcome                           string
	Reflections                       int
	Model                             string
}

// Execer runs a statement (a commit's transaction).
type Execer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// KeepOutcome writes a session's label over the one before it, but only while the last
// turn it read is still kept and the namespace still opts in: false when not (an
// erasure or a redaction removed the turn, or the namespace opted out meanwhile).
func KeepOutcome(ctx context.Context, q Execer, o Outcome) (bool, error) {
	var n int
	err := q.QueryRow(ctx, `WITH up AS (
			INSERT INTO loom.session_outcomes (org, namespace, user_id, session_id, window_end, seq, outcome, reflections, model)
			SELECT $1, $2, e.user_id, e.session_id, $5, e.seq, $6, $7, $8 FROM loom.memory_evidence e
			WHERE e.org = $1 AND e.namespace = $2 AND e.user_id = (SELECT loom.user_ref($1, $3))
			  AND e.session_id = (SELECT loom.session_ref($1, $4)) AND e.message_index = $5
			  AND EXISTS (SELECT 1 FROM loom.namespaces n WHERE n.org = $1 AND n.namespace = $2 AND n.`+OptedIn+`)
			LIMIT 1
			ON CONFLICT (org, namespace, user_id, session_id) DO UPDATE SET window_end = excluded.window_end, seq = excluded.seq,
				outcome = excluded.outcome, reflections = excluded.reflections, model = excluded.model, labelled_at = now()
			WHERE loom.session_outcomes.window_end < excluded.window_end
			RETURNING 1)
		SELECT count(*) FROM up`, o.Org, o.Namespace, o.UserID, o.SessionID, o.WindowEnd, o.Outcome, o.Reflections, o.Model).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("keep the session's outcome: %w", err)
	}
	return n == 1, nil
}
