package command

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
)

// The statements of loom.conflict_undos: the Undos of the resolver's retirements.

// recordUndo writes the Undo's record: the restored row (at the version this commit
// gives it) and its winner, with the values both hold now.
func recordUndo(ctx context.Context, tx pgx.Tx, loser *memrow.Row, winnerID string) error {
	winnerSHA, err := heads.ContentSHA256(ctx, tx, loser.Org, loser.Namespace, winnerID)
	if err != nil {
		return fmt.Errorf("read the retirement's winner: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO loom.conflict_undos (org, namespace, loser_id, winner_id, loser_sha, winner_sha, undo_version)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (org, namespace, loser_id, winner_id) DO UPDATE SET loser_sha = EXCLUDED.loser_sha,
			winner_sha = EXCLUDED.winner_sha, undo_version = EXCLUDED.undo_version, undone_at = now()`,
		loser.Org, loser.Namespace, loser.MemoryID, winnerID, loser.ContentSHA256, winnerSHA, loser.Version); err != nil {
		return fmt.Errorf("record the undo: %w", err)
	}
	return nil
}

// undoneBetween reports, for each of peers, whether an Undo left its pair with row
// alone: a record of the pair, either way round, while both still hold the values
// they held at the Undo.
func (s *Service) undoneBetween(ctx context.Context, row *memrow.Row, peers []*memrow.Row) (map[string]bool, error) {
	if len(peers) == 0 {
		return nil, nil
	}
	sha := map[string]string{row.MemoryID: row.ContentSHA256}
	ids := make([]string, len(peers))
	for i, p := range peers {
		ids[i], sha[p.MemoryID] = p.MemoryID, p.ContentSHA256
	}
	rows, err := s.pool.Query(ctx, `SELECT loser_id::text, winner_id::text, loser_sha, winner_sha FROM loom.conflict_undos
		WHERE org = $1 AND namespace = $2 AND ((loser_id = $3 AND winner_id = ANY($4)) OR (winner_id = $3 AND loser_id = ANY($4)))`,
		row.Org, row.Namespace, row.MemoryID, parseIDs(ids))
	if err != nil {
		return nil, fmt.Errorf("read the undone retirements: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var loser, winner, loserSHA, winnerSHA string
		if err := rows.Scan(&loser, &winner, &loserSHA, &winnerSHA); err != nil {
			return nil, fmt.Errorf("read the undone retirements: %w", err)
		}
		if sha[loser] != loserSHA || sha[winner] != winnerSHA {
			continue // a later write of either row is a new statement, judged afresh
		}
		other := loser
		if loser == row.MemoryID {
			other = winner
		}
		out[other] = true
	}
	return out, rows.Err()
}
