package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/heads"
)

// loom.consolidation_runs (migration 085): each memory.consolidate that wrote, with its
// clusters appended in the transaction that commits each one, and its undo. Ids,
// versions and counts: an undo reads each merged row back from the journal. Also
// memory.consolidate's read of stored vectors from ClickHouse's memory_embeddings.

// runCluster is one merged cluster as its run records it.
type runCluster struct {
	SummaryID      string      `json:"summary_id"`
	SummaryVersion int64       `json:"summary_version"`
	Merged         []runMerged `json:"merged"`
}

// runMerged is one merged row: its memory, the version the merge read and the version
// of the tombstone that retired it.
type runMerged struct {
	MemoryID         string `json:"memory_id"`
	ReadVersion      int64  `json:"read_version"`
	TombstoneVersion int64  `json:"tombstone_version"`
}

// consolidationRun is a stored run.
type consolidationRun struct {
	ID, Org, Namespace, UserID, Status string
	Clusters                           []runCluster
}

func startRun(ctx context.Context, q heads.Querier, id, org, ns, userID, actor string) error {
	var got string
	err := q.QueryRow(ctx, `INSERT INTO loom.consolidation_runs (id, org, namespace, user_id, actor, clusters, model_calls, merged_rows)
		VALUES ($1, $2, $3, loom.named_user($2, $4), $5, '[]', 0, 0) RETURNING id::text`, id, org, ns, userID, actor).Scan(&got)
	if err != nil {
		return fmt.Errorf("log the consolidation run: %w", err)
	}
	return nil
}

// appendRunCluster records a merged cluster in the transaction that commits it.
func appendRunCluster(ctx context.Context, tx pgx.Tx, id string, c runCluster) error {
	b, err := json.Marshal([]runCluster{c})
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE loom.consolidation_runs SET clusters = clusters || $2::jsonb, merged_rows = merged_rows + $3
		WHERE id = $1`, id, string(b), len(c.Merged))
	if err != nil {
		return fmt.Errorf("log the consolidation's cluster: %w", err)
	}
	return nil
}

// finishRun records a run's model calls and failed clusters.
func finishRun(ctx context.Context, q heads.Querier, id string, calls int, failures []clusterFailure) error {
	b, err := json.Marshal(failures)
	if err != nil {
		return err
	}
	var got string
	err = q.QueryRow(ctx, `UPDATE loom.consolidation_runs SET model_calls = $2, failures = $3::jsonb WHERE id = $1 RETURNING id::text`,
		id, calls, string(b)).Scan(&got)
	if err != nil {
		return fmt.Errorf("log the consolidation run: %w", err)
	}
	return nil
}

// readRun reads a run of a namespace, nil when it has none by that id.
func readRun(ctx context.Context, q heads.Querier, org, ns, id string) (*consolidationRun, error) {
	r := &consolidationRun{}
	var clusters []byte
	err := q.QueryRow(ctx, `SELECT id::text, org, namespace, loom.user_name(org, user_id), status, clusters FROM loom.consolidation_runs
		WHERE id = $1 AND org = $2 AND namespace = $3`, id, org, ns).Scan(&r.ID, &r.Org, &r.Namespace, &r.UserID, &r.Status, &clusters)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the consolidation run: %w", err)
	}
	if err := json.Unmarshal(clusters, &r.Clusters); err != nil {
		return nil, fmt.Errorf("read the consolidation run: %w", err)
	}
	return r, nil
}

// markUndone marks a run undone; false when it already was.
func markUndone(ctx context.Context, q heads.Querier, id string) (bool, error) {
	var got string
	err := q.QueryRow(ctx, `UPDATE loom.consolidation_runs SET status = 'undone', undone_at = now() WHERE id = $1 AND status = 'done'
		RETURNING id::text`, id).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("mark the consolidation undone: %w", err)
	}
	return true, nil
}

// storedVectors reads the value vectors ClickHouse stores for a scope's live search
// documents, by identity and content hash (a document of another value is no vector of
// the head's).
func (s *Service) storedVectors(ctx context.Context, org, ns, userID string) (map[string][]float32, error) {
	where := []string{"tombstone = 0", "embedding_dim > 0"}
	args := []any{org, ns}
	if userID != "" {
		where = append(where, "user_id = ?")
		args = append(args, userID)
	}
	rows, err := s.ch.Query(s.ch.Ctx(ctx), `SELECT agent, user_id, session_id, memory_key, content_sha256, embedding
		FROM loom.memory_embeddings FINAL PREWHERE org = ? AND namespace = ? WHERE `+strings.Join(where, " AND "), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]float32{}
	for rows.Next() {
		var agent, user, session, key, sha string
		var v []float32
		if err := rows.Scan(&agent, &user, &session, &key, &sha, &v); err != nil {
			return nil, err
		}
		out[agent+"\x00"+user+"\x00"+session+"\x00"+key+"\x00"+sha] = v
	}
	return out, rows.Err()
}
