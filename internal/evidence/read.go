package evidence

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/rowseal"
)

// Opened is a kept turn, its text opened. Its agent and session are its sealed
// text's; SessionRef is the session as the row stores it (loom.session_ref), which
// Spans reads by.
type Opened struct {
	TurnID       string
	Agent        string
	UserID       string
	SessionID    string
	SessionRef   string
	Role         string
	Speaker      string
	MessageIndex int
	OccurredAt   time.Time
	Text         string
}

// opened selects a row's columns with its text opened (alias e).
const opened = `e.turn_id::text, e.agent, loom.user_name(e.org, e.user_id), e.session_id, e.role, e.message_index, e.occurred_at,
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
		if err := rows.Scan(&o.TurnID, &o.Agent, &o.UserID, &o.SessionRef, &o.Role, &o.MessageIndex, &o.OccurredAt, &text); err != nil {
			return nil, err
		}
		if err := o.open(text); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// open decodes a row's opened text: its agent, session, text and speaker (the
// columns hold the agent's and the session's references).
func (o *Opened) open(text string) error {
	var st sealedText
	if err := json.Unmarshal([]byte(text), &st); err != nil {
		return fmt.Errorf("decode turn %s: %w", o.TurnID, err)
	}
	o.Agent, o.SessionID, o.Text, o.Speaker = st.Agent, st.Session, st.Text, st.Speaker
	return nil
}

// Scope is what a read reaches: one namespace, and one user's turns or every user's
// ("").
type Scope struct {
	Org, Namespace, UserID string
}

// sealedCols selects a row's columns with its data key as stored and its text sealed
// (alias e), for openRows.
const sealedCols = `e.turn_id::text, e.agent, loom.user_name(e.org, e.user_id), e.session_id, e.role, e.message_index, e.occurred_at,
	e.data_key, e.sealed`

// openRows reads rows of sealedCols after lead, the columns a statement selects
// before them, opens each in Go and hands it to add (lead holds the row's own leading
// columns then). unwrap opens a data key (kek.Ring.Unwrap), as RecentChunks opens
// chunks: a read that opens thousands of turns pays microseconds a row so, where
// loom.unwrapped_key in SQL costs about a millisecond a row.
func openRows(rows pgx.Rows, unwrap func([]byte) ([]byte, error), lead []any, add func(Opened)) error {
	defer rows.Close()
	for rows.Next() {
		var o Opened
		var stored, sealed []byte
		dest := append(slices.Clone(lead), &o.TurnID, &o.Agent, &o.UserID, &o.SessionRef, &o.Role, &o.MessageIndex, &o.OccurredAt,
			&stored, &sealed)
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		if err := openRow(&o, stored, sealed, unwrap); err != nil {
			return err
		}
		add(o)
	}
	return rows.Err()
}

// openRow opens a row's sealed text and speaker in Go, its data key opened by unwrap.
func openRow(o *Opened, stored, sealed []byte, unwrap func([]byte) ([]byte, error)) error {
	key, err := unwrap(stored)
	if err != nil {
		return fmt.Errorf("open turn %s's key: %w", o.TurnID, err)
	}
	plain, err := rowseal.Open(key, rowseal.LabelTurn, sealed)
	if err != nil {
		return fmt.Errorf("open turn %s: %w", o.TurnID, err)
	}
	return o.open(string(plain))
}

// Span is a run of one user's session's turns: message indexes From to To. The
// session is named as the rows store it (Opened.SessionRef, Candidate.SessionRef).
type Span struct {
	UserID, SessionRef string
	From, To           int
}

// Spans reads the turns of spans of one namespace in one statement, each span's
// oldest first, opened in Go with unwrap: spans[i]'s turns are out[i].
func Spans(ctx context.Context, q Querier, org, ns string, spans []Span, unwrap func([]byte) ([]byte, error)) ([][]Opened, error) {
	out := make([][]Opened, len(spans))
	if len(spans) == 0 {
		return out, nil
	}
	users, sessions := make([]string, len(spans)), make([]string, len(spans))
	froms, tos := make([]int32, len(spans)), make([]int32, len(spans))
	for i, sp := range spans {
		users[i], sessions[i], froms[i], tos[i] = sp.UserID, sp.SessionRef, int32(max(sp.From, 0)), int32(sp.To)
	}
	// Each span is its own lookup of the session index (LATERAL), whatever the
	// planner's statistics say of the table: a join planned on a table's stale
	// row count scanned every turn of the namespace once a span.
	rows, err := q.Query(ctx, `SELECT w.i, e.*
		FROM unnest($3::text[], $4::text[], $5::int[], $6::int[]) WITH ORDINALITY AS w(user_id, session_ref, lo, hi, i)
		CROSS JOIN LATERAL (SELECT `+sealedCols+` FROM loom.memory_evidence e
			WHERE e.org = $1 AND e.namespace = $2 AND e.user_id = loom.user_ref($1, w.user_id) AND e.session_id = w.session_ref
			  AND e.message_index BETWEEN w.lo AND w.hi
			ORDER BY e.message_index, e.occurred_at) e
		ORDER BY w.i, e.message_index, e.occurred_at`, org, ns, users, sessions, froms, tos)
	if err != nil {
		return nil, fmt.Errorf("read the turns' windows: %w", err)
	}
	var i int64 // the span's ordinality, from 1
	if err := openRows(rows, unwrap, []any{&i}, func(o Opened) { out[i-1] = append(out[i-1], o) }); err != nil {
		return nil, fmt.Errorf("read the turns' windows: %w", err)
	}
	return out, nil
}

// Window reads turns of one user's session with indexes from..to, oldest first.
func Window(ctx context.Context, q Querier, s Scope, sessionID string, from, to int) ([]Opened, error) {
	out, err := collect(q.Query(ctx, `SELECT `+opened+` FROM loom.memory_evidence e
		WHERE e.org = $1 AND e.namespace = $2 AND e.user_id = (SELECT loom.user_ref($1, $3)) AND e.session_id = (SELECT loom.session_ref($1, $4))
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
		WHERE e.org = $1 AND e.namespace = $2 AND ($3 = '' OR e.user_id = (SELECT loom.user_ref($1, $3))) AND e.session_id = (SELECT loom.session_ref($1, $4))
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
		WHERE l.org = $1 AND l.namespace = $2 AND l.memory_id = ANY($3::uuid[]) AND ($4 = '' OR e.user_id = (SELECT loom.user_ref($1, $4)))`,
		s.Org, s.Namespace, memoryIDs, s.UserID)
	if err != nil {
		return nil, fmt.Errorf("read the memories' sources: %w", err)
	}
	defer rows.Close()
	out := map[string][]Opened{}
	for rows.Next() {
		var id, text string
		var o Opened
		if err := rows.Scan(&id, &o.TurnID, &o.Agent, &o.UserID, &o.SessionRef, &o.Role, &o.MessageIndex, &o.OccurredAt, &text); err != nil {
			return nil, fmt.Errorf("read the memories' sources: %w", err)
		}
		if err := o.open(text); err != nil {
			return nil, err
		}
		out[id] = append(out[id], o)
	}
	return out, rows.Err()
}

// EachTurn calls fn with every turn of a namespace, by agent, user, session (each
// grouped in its reference's order, not its name's) and message index, opened in Go with unwrap, with its source and the memories drawn
// from it: a snapshot's read, streamed row by row.
func EachTurn(ctx context.Context, q Querier, org, ns string, unwrap func([]byte) ([]byte, error),
	fn func(o Opened, source string, memoryIDs []string) error) error {
	return eachTurn(ctx, q, `e.org = $1 AND e.namespace = $2`, []any{org, ns}, unwrap,
		func(_ string, o Opened, source string, memoryIDs []string) error { return fn(o, source, memoryIDs) })
}

// EachTurnOf calls fn with every turn of one user in the org's namespaces (nil: every
// one), by namespace, agent, session (in their references' order) and message index, as EachTurn does: a
// subject-access export's read.
func EachTurnOf(ctx context.Context, q Querier, org, userID string, namespaces []string, unwrap func([]byte) ([]byte, error),
	fn func(ns string, o Opened, source string, memoryIDs []string) error) error {
	return eachTurn(ctx, q, `e.org = $1 AND e.user_id = (SELECT loom.user_ref($1, $2)) AND ($3::text[] IS NULL OR e.namespace = ANY($3))`,
		[]any{org, userID, namespaces}, unwrap, fn)
}

func eachTurn(ctx context.Context, q Querier, where string, args []any, unwrap func([]byte) ([]byte, error),
	fn func(ns string, o Opened, source string, memoryIDs []string) error) error {
	rows, err := q.Query(ctx, `SELECT e.namespace, e.source, ARRAY(SELECT DISTINCT l.memory_id::text FROM loom.memory_belief_sources l
			WHERE l.org = e.org AND l.namespace = e.namespace AND l.turn_id = e.turn_id ORDER BY 1), `+sealedCols+`
		FROM loom.memory_evidence e WHERE `+where+`
		ORDER BY e.namespace, e.agent, e.user_id, e.session_id, e.message_index, e.occurred_at`, args...)
	if err != nil {
		return fmt.Errorf("read the turns: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var o Opened
		var ns, source string
		var memoryIDs []string
		var stored, sealed []byte
		if err := rows.Scan(&ns, &source, &memoryIDs, &o.TurnID, &o.Agent, &o.UserID, &o.SessionRef, &o.Role, &o.MessageIndex,
			&o.OccurredAt, &stored, &sealed); err != nil {
			return fmt.Errorf("read the turns: %w", err)
		}
		if err := openRow(&o, stored, sealed, unwrap); err != nil {
			return err
		}
		if err := fn(ns, o, source, memoryIDs); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Held reads which of turn ids a namespace holds.
func Held(ctx context.Context, q Querier, org, ns string, turnIDs []string) (map[string]bool, error) {
	rows, err := q.Query(ctx, `SELECT turn_id::text FROM loom.memory_evidence WHERE org = $1 AND namespace = $2 AND turn_id = ANY($3::uuid[])`,
		org, ns, turnIDs)
	if err != nil {
		return nil, fmt.Errorf("read the held turns: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read the held turns: %w", err)
	}
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}
