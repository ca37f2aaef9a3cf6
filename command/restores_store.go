package command

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/httperr"
)

// The statements of loom.namespace_restores: the restores that completed.

// restoredBefore fills ans with the answer of a completed restore of the snapshot into
// the namespace, if there is one.
func (s *Service) restoredBefore(ctx context.Context, org, ns string, snapID uuid.UUID, ans *RestoreAnswer) (bool, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, `SELECT counts FROM loom.namespace_restores WHERE org = $1 AND namespace = $2 AND snapshot_id = $3`,
		org, ns, snapID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, httperr.Store("reading earlier restores", err)
	}
	ans.Replayed = true
	return true, json.Unmarshal(raw, &ans.Counts)
}

// recordRestore records a completed restore of the snapshot into the namespace, with
// its counts, once.
func (s *Service) recordRestore(ctx context.Context, org, ns string, snapID uuid.UUID, source string, counts []byte, actor string) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO loom.namespace_restores (org, namespace, snapshot_id, source, counts, actor)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`, org, ns, snapID, source, counts, actor)
	return err
}
