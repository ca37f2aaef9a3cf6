// Package learnings owns the statements over the learnings queue: rules about the
// agent itself (an extracted fact with about="agent") that memory.set_from_messages'
// loom.bulk_write step files as pending candidates (loom.learnings_queue) with the
// user's quote that supports each (loom.learnings_supporters), never as memories. The
// write side inserts them in the facts' transaction; the read side lists them
// (learnings.list); an erasure deletes them through internal/erasure's scope
// predicates. Texts are sealed as a turn's are (AES-256-CBC under HMAC-SHA256(data
// key, "loom.learning"), opened in SQL with the key unwrapped by loom.unwrapped_key).
package learnings

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/rowseal"
)

// SourceAssistantTurn: a rule the user said to the bot in a conversation.
const SourceAssistantTurn = "assistant_turn"

// Sealed is a text sealed under a data key of its own: the key as stored (wrapped
// under the KEK) and the text sealed under the unwrapped key.
type Sealed struct {
	DataKey, Text []byte
}

// sealedText is what a row seals: the agent (a rule's and a supporter's), the session
// (a supporter's; "" for a rule) and the text. The agent and session columns hold
// their references (migration 176); reads answer these.
type sealedText struct {
	Agent   string `json:"agent"`
	Session string `json:"session"`
	Text    string `json:"text"`
}

// Seal seals a row's agent, session ("" for a rule) and text under dataKey
// (unwrapped); storedKey is the same key as the row keeps it.
func Seal(dataKey, storedKey []byte, agent, session, text string) (Sealed, error) {
	plain, err := json.Marshal(sealedText{Agent: agent, Session: session, Text: text})
	if err != nil {
		return Sealed{}, fmt.Errorf("encode the learning: %w", err)
	}
	out, err := rowseal.Seal(dataKey, rowseal.LabelLearning, plain)
	if err != nil {
		return Sealed{}, fmt.Errorf("seal the learning: %w", err)
	}
	return Sealed{DataKey: storedKey, Text: out}, nil
}

// Candidate is a rule filed to the queue with its one supporter: the identity it was
// said under and the message that says it.
type Candidate struct {
	Org, Namespace, CandidateID string
	Agent, UserID, SessionID    string
	MessageIndex                int
	Rule, Quote                 Sealed
}

// Insert files candidates with their supporters, in tx. It reads the namespace's
// generation under its row lock, so an erasure of the scope either sees the rows or
// fences them out.
func Insert(ctx context.Context, tx pgx.Tx, cs []Candidate) error {
	if len(cs) == 0 {
		return nil
	}
	gen, err := generations.Advance(ctx, tx, cs[0].Org, cs[0].Namespace, 0)
	if err != nil {
		return fmt.Errorf("lock the generation of %s: %w", cs[0].Namespace, err)
	}
	b := &pgx.Batch{}
	for _, c := range cs {
		b.Queue(`INSERT INTO loom.learnings_queue (org, namespace, candidate_id, agent, source, generation, data_key, sealed)
			VALUES ($1, $2, $3, (SELECT loom.agent_ref($1, $4)), $5, $6, $7, $8)`,
			c.Org, c.Namespace, c.CandidateID, c.Agent, SourceAssistantTurn, gen, c.Rule.DataKey, c.Rule.Text)
		b.Queue(`INSERT INTO loom.learnings_supporters (org, namespace, candidate_id, agent, user_id, session_id, message_index,
				generation, data_key, sealed) SELECT $1, $2, $3, w.r[2], loom.named_user($1, $5), w.r[3], $7, $8, $9, $10
			FROM (SELECT loom.writer_refs($1, '', $4, $6) AS r) w`,
			c.Org, c.Namespace, c.CandidateID, c.Agent, c.UserID, c.SessionID, c.MessageIndex, gen, c.Quote.DataKey, c.Quote.Text)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("file the learnings: %w", err)
	}
	return nil
}

// Opened is a candidate as learnings.list reads it, its texts opened.
type Opened struct {
	CandidateID string      `json:"candidate_id"`
	Agent       string      `json:"agent"`
	Rule        string      `json:"rule"`
	Status      string      `json:"status"`
	Source      string      `json:"source"`
	CreatedAt   time.Time   `json:"created_at"`
	Supporters  []Supporter `json:"supporters"`
}

// Supporter is a user's quote that supports a candidate.
type Supporter struct {
	UserID       string    `json:"user_id"`
	SessionID    string    `json:"session_id"`
	MessageIndex int       `json:"message_index"`
	Quote        string    `json:"quote"`
	CreatedAt    time.Time `json:"created_at"`
}

// Querier is a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// List reads a namespace's newest candidates, up to limit, of agent ("" every agent's).
// With userID set, only the candidates that user supports, each with that user's
// supporters alone.
func List(ctx context.Context, q Querier, org, ns, agent, userID string, limit int) ([]Opened, error) {
	rows, err := q.Query(ctx, `WITH c AS (
			SELECT q.* FROM loom.learnings_queue q
			WHERE q.org = $1 AND q.namespace = $2 AND ($3 = '' OR q.agent = (SELECT loom.agent_ref($1, $3)))
			  AND ($4 = '' OR EXISTS (SELECT 1 FROM loom.learnings_supporters s
				WHERE s.org = q.org AND s.namespace = q.namespace AND s.candidate_id = q.candidate_id AND s.user_id = (SELECT loom.user_ref($1, $4))))
			ORDER BY q.created_at DESC, q.candidate_id LIMIT $5)
		SELECT c.candidate_id::text, c.status, c.source, c.created_at,
			convert_from(decrypt(c.sealed, hmac('loom.learning'::bytea, loom.unwrapped_key(c.data_key), 'sha256'), 'aes'), 'UTF8'),
			loom.user_name(s.org, s.user_id), s.message_index, s.created_at,
			convert_from(decrypt(s.sealed, hmac('loom.learning'::bytea, loom.unwrapped_key(s.data_key), 'sha256'), 'aes'), 'UTF8')
		FROM c JOIN loom.learnings_supporters s ON s.org = c.org AND s.namespace = c.namespace AND s.candidate_id = c.candidate_id
		WHERE $4 = '' OR s.user_id = (SELECT loom.user_ref($1, $4))
		ORDER BY c.created_at DESC, c.candidate_id, s.created_at, s.user_id, s.session_id, s.message_index`,
		org, ns, agent, userID, limit)
	if err != nil {
		return nil, fmt.Errorf("read the learnings: %w", err)
	}
	defer rows.Close()
	out := []Opened{}
	for rows.Next() {
		var o Opened
		var s Supporter
		var rule, quote string
		if err := rows.Scan(&o.CandidateID, &o.Status, &o.Source, &o.CreatedAt, &rule,
			&s.UserID, &s.MessageIndex, &s.CreatedAt, &quote); err != nil {
			return nil, fmt.Errorf("read the learnings: %w", err)
		}
		if err := openRow(&o, &s, rule, quote); err != nil {
			return nil, err
		}
		s.CreatedAt = s.CreatedAt.UTC()
		if n := len(out); n > 0 && out[n-1].CandidateID == o.CandidateID {
			out[n-1].Supporters = append(out[n-1].Supporters, s)
			continue
		}
		o.CreatedAt, o.Supporters = o.CreatedAt.UTC(), []Supporter{s}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the learnings: %w", err)
	}
	return out, nil
}

// openRow decodes a candidate's opened rule and a supporter's opened quote: the agent
// is the rule's, the session the quote's.
func openRow(o *Opened, s *Supporter, rule, quote string) error {
	var r, q sealedText
	if err := json.Unmarshal([]byte(rule), &r); err != nil {
		return fmt.Errorf("decode learning %s: %w", o.CandidateID, err)
	}
	if err := json.Unmarshal([]byte(quote), &q); err != nil {
		return fmt.Errorf("decode a supporter of learning %s: %w", o.CandidateID, err)
	}
	o.Agent, o.Rule = r.Agent, r.Text
	s.SessionID, s.Quote = q.Session, q.Text
	return nil
}

// EachOf calls fn, namespace by namespace and oldest first, with every candidate userID
// supports in org's namespaces (nil: every one), each with that user's supporters
// alone: what a subject-access export of the user holds of the queue.
func EachOf(ctx context.Context, q Querier, org, userID string, namespaces []string, fn func(ns string, o Opened) error) error {
	return each(ctx, q, `s.org = $1 AND s.user_id = (SELECT loom.user_ref($1, $2)) AND ($3::text[] IS NULL OR s.namespace = ANY($3))`,
		[]any{org, userID, namespaces}, fn)
}

// EachIn calls fn, oldest first, with every candidate of a namespace and all its
// supporters: what a namespace snapshot holds of the queue.
func EachIn(ctx context.Context, q Querier, org, ns string, fn func(o Opened) error) error {
	return each(ctx, q, `s.org = $1 AND s.namespace = $2`, []any{org, ns}, func(_ string, o Opened) error { return fn(o) })
}

// each reads the candidates whose supporters match where, grouped by candidate, each
// with its matching supporters, oldest first.
func each(ctx context.Context, q Querier, where string, args []any, fn func(ns string, o Opened) error) error {
	rows, err := q.Query(ctx, `SELECT c.namespace, c.candidate_id::text, c.status, c.source, c.created_at,
			convert_from(decrypt(c.sealed, hmac('loom.learning'::bytea, loom.unwrapped_key(c.data_key), 'sha256'), 'aes'), 'UTF8'),
			loom.user_name(s.org, s.user_id), s.message_index, s.created_at,
			convert_from(decrypt(s.sealed, hmac('loom.learning'::bytea, loom.unwrapped_key(s.data_key), 'sha256'), 'aes'), 'UTF8')
		FROM loom.learnings_supporters s JOIN loom.learnings_queue c
			ON c.org = s.org AND c.namespace = s.namespace AND c.candidate_id = s.candidate_id
		WHERE `+where+`
		ORDER BY c.namespace, c.created_at, c.candidate_id, s.created_at, s.user_id, s.session_id, s.message_index`, args...)
	if err != nil {
		return fmt.Errorf("read the learnings: %w", err)
	}
	defer rows.Close()
	var cur *Opened
	var curNS string
	for rows.Next() {
		var ns string
		var o Opened
		var s Supporter
		var rule, quote string
		if err := rows.Scan(&ns, &o.CandidateID, &o.Status, &o.Source, &o.CreatedAt, &rule,
			&s.UserID, &s.MessageIndex, &s.CreatedAt, &quote); err != nil {
			return fmt.Errorf("read the learnings: %w", err)
		}
		if err := openRow(&o, &s, rule, quote); err != nil {
			return err
		}
		s.CreatedAt = s.CreatedAt.UTC()
		if cur != nil && curNS == ns && cur.CandidateID == o.CandidateID {
			cur.Supporters = append(cur.Supporters, s)
			continue
		}
		if cur != nil {
			if err := fn(curNS, *cur); err != nil {
				return err
			}
		}
		o.CreatedAt, o.Supporters = o.CreatedAt.UTC(), []Supporter{s}
		cur, curNS = &o, ns
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the learnings: %w", err)
	}
	if cur != nil {
		return fn(curNS, *cur)
	}
	return nil
}

// Kept is a candidate as a namespace restore files it again: its id, agent, source,
// status and time as the snapshot holds them, its texts sealed anew.
type Kept struct {
	Org, Namespace, CandidateID, Agent string
	Source, Status                     string
	CreatedAt                          time.Time
	Rule                               Sealed
	Supporters                         []KeptSupporter
}

// KeptSupporter is one supporter of a Kept candidate.
type KeptSupporter struct {
	UserID, SessionID string
	MessageIndex      int
	CreatedAt         time.Time
	Quote             Sealed
}

// Restore files a kept candidate and its supporters again in tx, under its own id,
// each row dated as the snapshot dates it. A row the namespace holds already is left
// as it is, so a restore run again files nothing; added says whether the candidate's
// row is new. Like Insert, it reads the namespace's generation under its row lock.
func Restore(ctx context.Context, tx pgx.Tx, k Kept) (added bool, err error) {
	gen, err := generations.Advance(ctx, tx, k.Org, k.Namespace, 0)
	if err != nil {
		return false, fmt.Errorf("lock the generation of %s: %w", k.Namespace, err)
	}
	tag, err := tx.Exec(ctx, `INSERT INTO loom.learnings_queue (org, namespace, candidate_id, agent, source, status, generation, data_key, sealed, created_at)
		VALUES ($1, $2, $3, (SELECT loom.agent_ref($1, $4)), $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING`,
		k.Org, k.Namespace, k.CandidateID, k.Agent, k.Source, k.Status, gen, k.Rule.DataKey, k.Rule.Text, k.CreatedAt)
	if err != nil {
		return false, fmt.Errorf("file the learning again: %w", err)
	}
	b := &pgx.Batch{}
	for _, s := range k.Supporters {
		b.Queue(`INSERT INTO loom.learnings_supporters (org, namespace, candidate_id, agent, user_id, session_id, message_index,
				generation, data_key, sealed, created_at) SELECT $1, $2, $3, w.r[2], loom.named_user($1, $5), w.r[3], $7, $8, $9, $10, $11
			FROM (SELECT loom.writer_refs($1, '', $4, $6) AS r) w ON CONFLICT DO NOTHING`,
			k.Org, k.Namespace, k.CandidateID, k.Agent, s.UserID, s.SessionID, s.MessageIndex, gen, s.Quote.DataKey, s.Quote.Text, s.CreatedAt)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return false, fmt.Errorf("file the learning's supporters again: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}
