// Package evidence owns the statements over the conversation's record:
// loom.memory_evidence (the turns memory.observe appended and memory.set_from_messages
// read), loom.memory_belief_sources (which turns a memory version was drawn from), the
// verbatim chunks cut from the turns with their lineage (chunks.go) and the session
// digests (digests.go).
// The write side queues the rows in the transaction that commits their
// memory.turns_observed record; the read side opens them for memory.recall; an
// erasure deletes them through internal/erasure's scope predicates. A turn's text and
// speaker are sealed as a memory row's text is (AES-256-CBC under HMAC-SHA256(data
// key, "loom.turn"), opened in SQL with the key unwrapped by loom.unwrapped_key).
package evidence

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/loomplane/loom/internal/rowseal"
)

// Sources of kept turns.
const (
	SourceObserve    = "observe"
	SourceExtraction = "extraction"
	SourceImport     = "import"
)

// Querier is a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Turn is one kept turn as the write side queues it: the data key as stored (wrapped
// under the KEK) and the text sealed under it (Seal).
type Turn struct {
	Org, Namespace, TurnID         string
	Agent, UserID, SessionID, Role string
	MessageIndex                   int
	OccurredAt                     time.Time
	Seq                            int64
	Source                         string
	DataKey, Sealed                []byte
	Terms                          []int64 // TermHashes of its text
}

// sealedText is what a row seals. Its agent and session lead (the columns hold their
// references, migration 176): migration 176 sealed a row written before it again with
// them, and a text that starts otherwise shares no sealed block with the one it
// replaced under the same key and IV.
type sealedText struct {
	Agent   string `json:"agent"`
	Session string `json:"session"`
	Text    string `json:"text"`
	Speaker string `json:"speaker,omitempty"`
}

// Seal seals a turn's agent, session, text and speaker under its data key
// (unwrapped), as the row keeps them.
func Seal(dataKey []byte, agent, session, text, speaker string) ([]byte, error) {
	plain, err := json.Marshal(sealedText{Agent: agent, Session: session, Text: text, Speaker: speaker})
	if err != nil {
		return nil, fmt.Errorf("encode the turn's text: %w", err)
	}
	out, err := rowseal.Seal(dataKey, rowseal.LabelTurn, plain)
	if err != nil {
		return nil, fmt.Errorf("seal the turn's text: %w", err)
	}
	return out, nil
}

// nextIndex is the session's next turn index.
const nextIndex = `SELECT coalesce(max(message_index) + 1, 0) FROM loom.memory_evidence
	WHERE org = $1 AND namespace = $2 AND user_id = (SELECT loom.user_ref($1, $3)) AND session_id = (SELECT loom.session_ref($1, $4))`

// NextIndex reads, under the namespace's generation lock the caller holds, the index
// the session's next turn takes: the session's turns are numbered in arrival order.
func NextIndex(ctx context.Context, q Querier, org, ns, userID, sessionID string) (int, error) {
	var next int
	err := q.QueryRow(ctx, nextIndex, org, ns, userID, sessionID).Scan(&next)
	if err != nil {
		return 0, fmt.Errorf("read the session's next turn index: %w", err)
	}
	return next, nil
}

// QueueNextIndex queues NextIndex's read into next, for a batch that holds the
// namespace's generation lock by the time it runs (queued after the advance).
func QueueNextIndex(b *pgx.Batch, org, ns, userID, sessionID string, next *int) {
	b.Queue(nextIndex, org, ns, userID, sessionID).QueryRow(func(r pgx.Row) error { return r.Scan(next) })
}

// namedUsers follows a CTE t of rows to insert (org, user_id, ...): n names each
// distinct user of t once (loom.named_user, which reads the org's key and the user's
// name), rather than once a row; the insert joins t to it.
const namedUsers = `, n AS MATERIALIZED (SELECT d.org, d.user_id, loom.named_user(d.org, d.user_id) AS ref
		FROM (SELECT DISTINCT org, user_id FROM t) d)`

// writerRefs follows a CTE t of rows to insert (org, agent, session_id, ...) and
// namedUsers: w holds each distinct agent and session of t by reference (r[2], r[3]
// of loom.writer_refs, the org's key unwrapped once), named once rather than once a
// row.
const writerRefs = `, w AS MATERIALIZED (SELECT d.org, d.agent, d.session_id, loom.writer_refs(d.org, '', d.agent, d.session_id) AS r
		FROM (SELECT DISTINCT org, agent, session_id FROM t) d)`

// QueueInsert queues the insert of turns, all in one statement: Postgres plans and
// runs one INSERT over arrays, not one a turn. A turn's terms travel as an array
// literal (an array of arrays would be one flat array to unnest).
func QueueInsert(b *pgx.Batch, turns []Turn) {
	if len(turns) == 0 {
		return
	}
	n := len(turns)
	orgs, nss, ids, agents, users, sessions, roles := make([]string, n), make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n)
	indexes, seqs, ats, sources := make([]int64, n), make([]int64, n), make([]time.Time, n), make([]string, n)
	keys, sealed, terms := make([][]byte, n), make([][]byte, n), make([]*string, n)
	for i, t := range turns {
		orgs[i], nss[i], ids[i], agents[i], users[i], sessions[i], roles[i] = t.Org, t.Namespace, t.TurnID, t.Agent, t.UserID, t.SessionID, t.Role
		indexes[i], seqs[i], ats[i], sources[i] = int64(t.MessageIndex), t.Seq, t.OccurredAt, t.Source
		keys[i], sealed[i], terms[i] = t.DataKey, t.Sealed, termsLiteral(t.Terms)
	}
	b.Queue(`WITH t AS (SELECT * FROM unnest($1::text[], $2::text[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[],
			$9::timestamptz[], $10::bigint[], $11::text[], $12::bytea[], $13::bytea[], $14::text[])
			AS t(org, namespace, turn_id, agent, user_id, session_id, role, message_index, occurred_at, seq, source, data_key, sealed, terms))`+namedUsers+writerRefs+`
		INSERT INTO loom.memory_evidence (org, namespace, turn_id, agent, user_id, session_id, role, message_index,
			occurred_at, seq, source, data_key, sealed, terms)
		SELECT t.org, t.namespace, t.turn_id, w.r[2], n.ref, w.r[3], t.role, t.message_index, t.occurred_at, t.seq,
			t.source, t.data_key, t.sealed, t.terms::bigint[]
		FROM t JOIN n ON n.org = t.org AND n.user_id = t.user_id
			JOIN w ON w.org = t.org AND w.agent = t.agent AND w.session_id = t.session_id`,
		orgs, nss, ids, agents, users, sessions, roles, indexes, ats, seqs, sources, keys, sealed, terms)
}

// termsLiteral is terms as a bigint[] literal; nil stays NULL.
func termsLiteral(terms []int64) *string {
	if terms == nil {
		return nil
	}
	var sb strings.Builder
	sb.WriteByte('{')
	for i, t := range terms {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.FormatInt(t, 10))
	}
	sb.WriteByte('}')
	out := sb.String()
	return &out
}

// Link is one belief source: a memory version drawn from a turn.
type Link struct {
	Org, Namespace, MemoryID string
	Version                  int64
	TurnID, UserID           string
	Seq                      int64 // the turn's record's seq
}

// InsertLinks writes belief sources; a link already kept is left as it is.
func InsertLinks(ctx context.Context, tx pgx.Tx, links []Link) error {
	if len(links) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	QueueInsertLinks(b, links)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("write the belief sources: %w", err)
	}
	return nil
}

// QueueInsertLinks queues the insert of belief sources in one statement; a link
// already kept is left as it is.
func QueueInsertLinks(b *pgx.Batch, links []Link) {
	if len(links) == 0 {
		return
	}
	n := len(links)
	orgs, nss, memoryIDs, versions, turnIDs, users, seqs := make([]string, n), make([]string, n), make([]string, n),
		make([]int64, n), make([]string, n), make([]string, n), make([]int64, n)
	for i, l := range links {
		orgs[i], nss[i], memoryIDs[i], versions[i], turnIDs[i], users[i], seqs[i] = l.Org, l.Namespace, l.MemoryID, l.Version, l.TurnID, l.UserID, l.Seq
	}
	b.Queue(`WITH t AS (SELECT * FROM unnest($1::text[], $2::text[], $3::uuid[], $4::bigint[], $5::uuid[], $6::text[], $7::bigint[])
			AS l(org, namespace, memory_id, version, turn_id, user_id, seq))`+namedUsers+`
		INSERT INTO loom.memory_belief_sources (org, namespace, memory_id, version, turn_id, user_id, seq)
		SELECT t.org, t.namespace, t.memory_id, t.version, t.turn_id, n.ref, t.seq
		FROM t JOIN n ON n.org = t.org AND n.user_id = t.user_id
		ON CONFLICT DO NOTHING`, orgs, nss, memoryIDs, versions, turnIDs, users, seqs)
}

// QueueNamespacesOfUser queues the read of the namespaces where a user has kept turns,
// chunks, session digests or learnings' supporters, for an erasure of the user.
func QueueNamespacesOfUser(b *pgx.Batch, org, userID string, into *[]string) {
	b.Queue(`SELECT namespace FROM loom.memory_evidence WHERE org = $1 AND user_id = ANY((SELECT loom.user_refs($1, $2))::text[])
		UNION SELECT namespace FROM loom.session_summaries WHERE org = $1 AND user_id = ANY((SELECT loom.user_refs($1, $2))::text[])
		UNION SELECT namespace FROM loom.memory_chunks WHERE org = $1 AND user_id = ANY((SELECT loom.user_refs($1, $2))::text[])
		UNION SELECT namespace FROM loom.learnings_supporters WHERE org = $1 AND user_id = ANY((SELECT loom.user_refs($1, $2))::text[])`, org, userID).
		Query(func(rows pgx.Rows) error {
			ns, err := pgx.CollectRows(rows, pgx.RowTo[string])
			*into = ns
			return err
		})
}

// QueueForgetSourcesOf queues, for a redaction of a memory's versions, the delete of
// the turns they were drawn from (and of the turns that restated the memory, linked
// with no version), with every link to those turns: a turn holds the text the
// redaction scrubs, and its row holds the only copy of its data key. The digests of
// those turns' sessions go too: a digest may restate what the redaction scrubs, and
// the session_digest pass writes the session's digest again from the turns left; so do
// the verbatim chunks cut from those turns, with their lineage.
// into receives the number of turns deleted.
func QueueForgetSourcesOf(b *pgx.Batch, org, ns, memoryID string, versions []int64, into *int64) {
	b.Queue(`WITH turns AS (
			DELETE FROM loom.memory_evidence e USING loom.memory_belief_sources l
			WHERE l.org = $1 AND l.namespace = $2 AND l.memory_id = $3 AND (l.version = ANY($4) OR l.version = 0)
			  AND e.org = l.org AND e.namespace = l.namespace AND e.turn_id = l.turn_id
			RETURNING e.turn_id, e.user_id, e.session_id),
		links AS (
			DELETE FROM loom.memory_belief_sources l USING turns
			WHERE l.org = $1 AND l.namespace = $2 AND l.turn_id = turns.turn_id),
		digests AS (
			DELETE FROM loom.session_summaries d USING turns
			WHERE d.org = $1 AND d.namespace = $2 AND d.user_id = turns.user_id AND d.session_id = turns.session_id),
		chunks AS (
			DELETE FROM loom.memory_chunks c USING loom.memory_chunk_sources cs, turns
			WHERE cs.org = $1 AND cs.namespace = $2 AND cs.turn_id = turns.turn_id
			  AND c.org = cs.org AND c.namespace = cs.namespace AND c.chunk_id = cs.chunk_id
			RETURNING c.chunk_id),
		chunk_links AS (
			DELETE FROM loom.memory_chunk_sources cs USING chunks
			WHERE cs.org = $1 AND cs.namespace = $2 AND cs.chunk_id = chunks.chunk_id)
		SELECT count(*) FROM turns`, org, ns, memoryID, versions).QueryRow(func(r pgx.Row) error { return r.Scan(into) })
}
