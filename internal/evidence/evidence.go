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

// sealedText is what a row seals.
type sealedText struct {
	Text    string `json:"text"`
	Speaker string `json:"speaker,omitempty"`
}

// Seal seals a turn's text and speaker under its data key (unwrapped), as the row
// keeps them.
func Seal(dataKey []byte, text, speaker string) ([]byte, error) {
	plain, err := json.Marshal(sealedText{Text: text, Speaker: speaker})
	if err != nil {
		return nil, fmt.Errorf("encode the turn's text: %w", err)
	}
	out, err := rowseal.Seal(dataKey, rowseal.LabelTurn, plain)
	if err != nil {
		return nil, fmt.Errorf("seal the turn's text: %w", err)
	}
	return out, nil
}

// NextIndex reads, under the namespace's generation lock the caller holds, the index
// the session's next turn takes: the session's turns are numbered in arrival order.
func NextIndex(ctx context.Context, q Querier, org, ns, userID, sessionID string) (int, error) {
	var next int
	err := q.QueryRow(ctx, `SELECT coalesce(max(message_index) + 1, 0) FROM loom.memory_evidence
		WHERE org = $1 AND namespace = $2 AND user_id = loom.user_ref($1, $3) AND session_id = $4`, org, ns, userID, sessionID).Scan(&next)
	if err != nil {
		return 0, fmt.Errorf("read the session's next turn index: %w", err)
	}
	return next, nil
}

// QueueInsert queues the insert of turns.
func QueueInsert(b *pgx.Batch, turns []Turn) {
	for _, t := range turns {
		b.Queue(`INSERT INTO loom.memory_evidence (org, namespace, turn_id, agent, user_id, session_id, role, message_index,
			occurred_at, seq, source, data_key, sealed, terms) VALUES ($1, $2, $3, $4, loom.named_user($1, $5), $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
			t.Org, t.Namespace, t.TurnID, t.Agent, t.UserID, t.SessionID, t.Role, t.MessageIndex, t.OccurredAt, t.Seq,
			t.Source, t.DataKey, t.Sealed, t.Terms)
	}
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
	for _, l := range links {
		b.Queue(`INSERT INTO loom.memory_belief_sources (org, namespace, memory_id, version, turn_id, user_id, seq)
			VALUES ($1, $2, $3, $4, $5, loom.named_user($1, $6), $7) ON CONFLICT DO NOTHING`,
			l.Org, l.Namespace, l.MemoryID, l.Version, l.TurnID, l.UserID, l.Seq)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("write the belief sources: %w", err)
	}
	return nil
}

// QueueNamespacesOfUser queues the read of the namespaces where a user has kept turns,
// chunks, session digests or learnings' supporters, for an erasure of the user.
func QueueNamespacesOfUser(b *pgx.Batch, org, userID string, into *[]string) {
	b.Queue(`SELECT namespace FROM loom.memory_evidence WHERE org = $1 AND user_id = loom.user_ref($1, $2)
		UNION SELECT namespace FROM loom.session_summaries WHERE org = $1 AND user_id = loom.user_ref($1, $2)
		UNION SELECT namespace FROM loom.memory_chunks WHERE org = $1 AND user_id = loom.user_ref($1, $2)
		UNION SELECT namespace FROM loom.learnings_supporters WHERE org = $1 AND user_id = loom.user_ref($1, $2)`, org, userID).
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
