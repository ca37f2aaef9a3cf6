package command

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/erasure"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/rowseal"
)

// The statements of loom.decision_records (migration 091): who decided a key, and what
// the decision supersedes, beside the decision memory. The key, agent and session are
// stored by reference (migration 174), bound through loom.writer_refs: a record is
// read by the identity that names it (memory.inspect's), so no read needs them back.
// Who decided and the keys it supersedes are sealed on the row (DecisionText) under a
// data key of the record's own, deleted with it; their columns keep '' and '{}'.
// The references' subquery is kept (OFFSET 0): pulled up, writer_refs ran, and
// unwrapped the org's key, once for each of its elements a statement used.

// decisionRecord is one record as decision.record writes it and memory.inspect reads it.
type decisionRecord struct {
	DecidedBy  string   `json:"decided_by"`
	Supersedes []string `json:"supersedes"`
	RecordedBy string   `json:"recorded_by"`
	MemoryID   string   `json:"memory_id"`
	Version    int64    `json:"version"`
}

// DecisionText is what a decision's record seals (migration 174): who decided and
// the keys it supersedes. memory.inspect opens it (query/inspect.go).
type DecisionText struct {
	DecidedBy  string   `json:"decided_by"`
	Supersedes []string `json:"supersedes"`
}

// writeDecisionRecord records the decision whose head row is (just written, in tx),
// bringing back a record a delete retired. Its text is sealed under a fresh data key
// (stored as ring wraps it).
func writeDecisionRecord(ctx context.Context, tx pgx.Tx, ring *kek.Ring, row *memrow.Row, rec decisionRecord) error {
	text, err := json.Marshal(DecisionText{DecidedBy: rec.DecidedBy, Supersedes: rec.Supersedes})
	if err != nil {
		return fmt.Errorf("encode the decision's record: %w", err)
	}
	key, stored, err := kek.NewKey(ring)
	if err != nil {
		return err
	}
	sealed, err := rowseal.Seal(key, rowseal.LabelDecision, text)
	if err != nil {
		return fmt.Errorf("seal the decision's record: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO loom.decision_records (org, namespace, agent, user_id, session_id, memory_key,
			memory_id, version, seq, decided_by, supersedes, recorded_by, sealed, data_key)
		SELECT $1, $2, w[2], loom.named_user($1, $4), w[3], w[1], $7, $8, $9, '', '{}', $10, $11, $12
		FROM (SELECT loom.writer_refs($1, $6, $3, $5) AS w OFFSET 0) r
		ON CONFLICT (org, namespace, agent, user_id, session_id, memory_key) DO UPDATE SET memory_id = EXCLUDED.memory_id,
			version = EXCLUDED.version, seq = EXCLUDED.seq, decided_by = '', supersedes = '{}', sealed = EXCLUDED.sealed,
			data_key = EXCLUDED.data_key, recorded_by = EXCLUDED.recorded_by, recorded_at = now(), retired_at = NULL, retired_by = NULL`,
		row.Org, row.Namespace, row.Agent, row.UserID, row.SessionID, row.MemoryKey, row.MemoryID, row.Version, row.Seq,
		rec.RecordedBy, sealed, stored); err != nil {
		return fmt.Errorf("record the decision: %w", err)
	}
	return nil
}

// retireDecisionRecord retires the record of a decision a delete tombstones, in the
// delete's transaction.
func retireDecisionRecord(ctx context.Context, tx pgx.Tx, id memrow.Identity, actor string) error {
	if _, err := tx.Exec(ctx, `UPDATE loom.decision_records SET retired_at = now(), retired_by = $7
		WHERE (org, namespace, agent, user_id, session_id, memory_key) = (SELECT $1, $2, w[2], loom.user_ref($1, $4), w[3], w[1]
			FROM (SELECT loom.writer_refs($1, $6, $3, $5) AS w OFFSET 0) r) AND retired_at IS NULL`,
		id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey, actor); err != nil {
		return fmt.Errorf("retire the decision's record: %w", err)
	}
	return nil
}

// decisionRecordsTable names loom.decision_records where an erasure counts what it removed.
const decisionRecordsTable = "loom.decision_records"

// eraseDecisionRecords deletes the records of an erasure's scope (args as
// erasure.ScopeParams names them).
func eraseDecisionRecords(ctx context.Context, tx pgx.Tx, args []any) (int64, error) {
	tag, err := tx.Exec(ctx, erasure.ScopeParams+` DELETE FROM loom.decision_records t USING p WHERE `+pgScope(decisionRecordsTable), args...)
	return tag.RowsAffected(), err
}
