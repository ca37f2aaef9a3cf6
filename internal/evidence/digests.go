package evidence

// This file owns loom.session_summaries (migration 061) for the conversation's record.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/loomplane/loom/internal/rowseal"
)

// A session digest (loom.session_summaries) is a digest of one user's session up to
// the turn at WindowEnd: the session_digest pass writes it with one model call over
// the digest before it and the turns since, so the newest digest covers the whole
// session and supersedes the ones before it (deleted as it is written). Its text is
// sealed under a data key of its own, kept wrapped on its row alone.

// Digest is a digest as the write side keeps it: the data key as stored (wrapped
// under the KEK) and the text sealed under it (SealDigest).
type Digest struct {
	Org, Namespace, UserID, SessionID string
	WindowEnd                         int    // the message index of the last turn it read
	LastTurnID                        string // when set, that turn's index is WindowEnd (InsertDigest)
	Turns                             int    // how many turns of the session it covers
	Seq                               int64  // the seq of that turn's record
	Model                             string
	DataKey, Sealed                   []byte
}

// sealedDigest is what a digest's row seals: its session (the column holds the
// session's reference, migration 176) and its text.
type sealedDigest struct {
	Session string `json:"session"`
	Text    string `json:"text"`
}

// openDigest decodes a digest's opened text into d.
func openDigest(d *OpenedDigest, plain []byte) error {
	var sd sealedDigest
	if err := json.Unmarshal(plain, &sd); err != nil {
		return fmt.Errorf("decode a digest: %w", err)
	}
	d.SessionID, d.Text = sd.Session, sd.Text
	return nil
}

// SealDigest seals a digest's session and text under its data key (unwrapped), as
// pgcrypto's decrypt(…, hmac('loom.digest', key, 'sha256'), 'aes') opens it:
// AES-256-CBC, zero IV, PKCS#7 padding, as a turn is sealed under 'loom.turn'.
func SealDigest(dataKey []byte, session, text string) ([]byte, error) {
	plain, err := json.Marshal(sealedDigest{Session: session, Text: text})
	if err != nil {
		return nil, fmt.Errorf("encode the session's digest: %w", err)
	}
	out, err := rowseal.Seal(dataKey, rowseal.LabelDigest, plain)
	if err != nil {
		return nil, fmt.Errorf("seal the session's digest: %w", err)
	}
	return out, nil
}

// InsertDigest writes a digest and deletes the session's digests it supersedes, in
// one statement, but only while the last turn it read is still kept: a digest of
// turns an erasure or a redaction removed meanwhile is not written (false). A digest
// naming its last turn by id (LastTurnID: a restore's, whose turns may be numbered
// after turns the session held already) ends at that turn's index, wherever it is.
func InsertDigest(ctx context.Context, q Querier, d Digest) (bool, error) {
	var lastTurn *string
	if d.LastTurnID != "" {
		lastTurn = &d.LastTurnID
	}
	var n int
	err := q.QueryRow(ctx, `WITH me AS MATERIALIZED (SELECT loom.session_ref($1, $4) AS session_ref),
		last AS (
			SELECT e.seq, e.message_index FROM loom.memory_evidence e
			WHERE e.org = $1 AND e.namespace = $2 AND e.user_id = (SELECT loom.user_ref($1, $3))
			  AND e.session_id = (SELECT session_ref FROM me)
			  AND CASE WHEN $10::uuid IS NULL THEN e.message_index = $5 ELSE e.turn_id = $10::uuid END
			LIMIT 1),
		ins AS (
			INSERT INTO loom.session_summaries (org, namespace, user_id, session_id, window_end, turns, seq, model, data_key, sealed)
			SELECT $1, $2, loom.named_user($1, $3), (SELECT session_ref FROM me), l.message_index, $6, l.seq, $7, $8, $9 FROM last l
			ON CONFLICT DO NOTHING RETURNING 1),
		old AS (
			DELETE FROM loom.session_summaries s
			WHERE s.org = $1 AND s.namespace = $2 AND s.user_id = (SELECT loom.user_ref($1, $3)) AND s.session_id = (SELECT session_ref FROM me)
			  AND s.window_end < (SELECT message_index FROM last) AND EXISTS (SELECT 1 FROM ins))
		SELECT count(*) FROM ins`,
		d.Org, d.Namespace, d.UserID, d.SessionID, d.WindowEnd, d.Turns, d.Model, d.DataKey, d.Sealed, lastTurn).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("write the session's digest: %w", err)
	}
	return n == 1, nil
}

// OpenedDigest is a kept digest, its text opened.
type OpenedDigest struct {
	UserID, SessionID string
	WindowEnd, Turns  int
	Model             string
	CreatedAt         time.Time
	Text              string
}

// NewestDigest reads the newest digest of a session in scope (every user's of it
// when s.UserID is ""); false when it has none.
func NewestDigest(ctx context.Context, q Querier, s Scope, sessionID string) (OpenedDigest, bool, error) {
	var d OpenedDigest
	var sessionRef string
	var plain []byte
	err := q.QueryRow(ctx, `SELECT loom.user_name(d.org, d.user_id), d.session_id, d.window_end, d.turns, d.model, d.created_at,
			decrypt(d.sealed, hmac('loom.digest'::bytea, loom.unwrapped_key(d.data_key), 'sha256'), 'aes')
		FROM loom.session_summaries d
		WHERE d.org = $1 AND d.namespace = $2 AND ($3 = '' OR d.user_id = (SELECT loom.user_ref($1, $3)))
		  AND d.session_id = (SELECT loom.session_ref($1, $4))
		ORDER BY d.created_at DESC, d.window_end DESC LIMIT 1`, s.Org, s.Namespace, s.UserID, sessionID).
		Scan(&d.UserID, &sessionRef, &d.WindowEnd, &d.Turns, &d.Model, &d.CreatedAt, &plain)
	if errors.Is(err, pgx.ErrNoRows) {
		return OpenedDigest{}, false, nil
	}
	if err != nil {
		return OpenedDigest{}, false, fmt.Errorf("read the session's digest: %w", err)
	}
	if err := openDigest(&d, plain); err != nil {
		return OpenedDigest{}, false, err
	}
	return d, true, nil
}

// OwedSession is a user's session that owes a digest: its turns From..LastIndex are
// not digested yet.
type OwedSession struct {
	Org, Namespace, UserID, SessionID string
	From, LastIndex                   int
}

// Owing is when a session owes a digest: it has turns written since Since, and either
// MinTurns turns not digested or its last turn written before IdleBefore.
type Owing struct {
	Since, IdleBefore time.Time
	MinTurns          int
	// Org and Namespace, when Namespace is set, keep to that namespace's sessions.
	Org, Namespace string
}

// SessionOpened is the SQL of a turn's session opened from its sealed text, the
// columns key (its data key as stored) and sealed naming it: the session column holds
// the reference (migration 176), so a read that answers a session from the turns
// (the passes' owed sessions) opens one turn of each.
func SessionOpened(key, sealed string) string {
	return `convert_from(decrypt(` + sealed + `, hmac('loom.turn'::bytea, loom.unwrapped_key(` + key + `), 'sha256'), 'aes'), 'UTF8')::json->>'session'`
}

var lastTurnSession = SessionOpened("last_key", "last_sealed")

// owedSessions is the select of the owed sessions; an org whose erasure runs is left
// out (its turns are being deleted).
var owedSessions = `WITH recent AS (
		SELECT DISTINCT org, namespace, user_id, session_id FROM loom.memory_evidence WHERE created_at >= $1
			AND ($5::text = '' OR (org = $4 AND namespace = $5))),
	sessions AS (
		SELECT r.org, r.namespace, r.user_id, r.session_id, t.message_index AS last_index, t.created_at AS last_at,
			t.data_key AS last_key, t.sealed AS last_sealed,
			coalesce((SELECT max(d.window_end) FROM loom.session_summaries d WHERE d.org = r.org AND d.namespace = r.namespace
				AND d.user_id = r.user_id AND d.session_id = r.session_id), -1) AS digested
		FROM recent r
		CROSS JOIN LATERAL (SELECT e.message_index, e.created_at, e.data_key, e.sealed FROM loom.memory_evidence e
			WHERE e.org = r.org AND e.namespace = r.namespace AND e.user_id = r.user_id AND e.session_id = r.session_id
			ORDER BY e.message_index DESC, e.occurred_at DESC LIMIT 1) t
		WHERE NOT EXISTS (SELECT 1 FROM loom.erasure_ledger l WHERE l.org = r.org AND l.status = 'running'))
	SELECT org, namespace, loom.user_name(org, user_id), ` + lastTurnSession + `, digested + 1, last_index, last_at FROM sessions
	WHERE last_index > digested AND (last_index - digested >= $3 OR last_at < $2)`

// OwedSessions reads up to limit sessions that owe a digest, the longest waiting first.
func OwedSessions(ctx context.Context, q Querier, o Owing, limit int) ([]OwedSession, error) {
	rows, err := q.Query(ctx, owedSessions+` ORDER BY last_at LIMIT $6`, o.Since, o.IdleBefore, o.MinTurns, o.Org, o.Namespace, limit)
	if err != nil {
		return nil, fmt.Errorf("read the sessions owing a digest: %w", err)
	}
	defer rows.Close()
	var out []OwedSession
	for rows.Next() {
		var s OwedSession
		var at time.Time
		if err := rows.Scan(&s.Org, &s.Namespace, &s.UserID, &s.SessionID, &s.From, &s.LastIndex, &at); err != nil {
			return nil, fmt.Errorf("read the sessions owing a digest: %w", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// CountOwedSessions counts the sessions that owe a digest.
func CountOwedSessions(ctx context.Context, q Querier, o Owing) (int64, error) {
	var n int64
	if err := q.QueryRow(ctx, `SELECT count(*) FROM (`+owedSessions+`) o`, o.Since, o.IdleBefore, o.MinTurns, o.Org, o.Namespace).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the sessions owing a digest: %w", err)
	}
	return n, nil
}
