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
// gives it) and its winner, with the values both hold now, as their content hashes
// keyed under each one's scope's key (migration 101): the table outlives an erasure,
// and a plain hash would confirm a guess of an erased value.
func recordUndo(ctx context.Context, tx pgx.Tx, loser *memrow.Row, winnerID string) error {
	winnerSHA, err := heads.ContentSHA256(ctx, tx, loser.Org, loser.Namespace, winnerID)
	if err != nil {
		return fmt.Errorf("read the retirement's winner: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO loom.conflict_undos (org, namespace, loser_id, winner_id, loser_sha, winner_sha, undo_version)
		SELECT $1, $2, $3, $4, coalesce(loom.content_hash($1, $2, (SELECT loom.user_ref($1, $8)), $5), ''),
			coalesce((SELECT loom.content_hash($1, $2, c.user_id, $6) FROM loom.memory_current c
				WHERE c.org = $1 AND c.namespace = $2 AND c.memory_id = $4 LIMIT 1), ''), $7
		ON CONFLICT (org, namespace, loser_id, winner_id) DO UPDATE SET loser_sha = EXCLUDED.loser_sha,
			winner_sha = EXCLUDED.winner_sha, undo_version = EXCLUDED.undo_version, undone_at = now()`,
		loser.Org, loser.Namespace, loser.MemoryID, winnerID, loser.ContentSHA256, winnerSHA, loser.Version, loser.UserID); err != nil {
		return fmt.Errorf("record the undo: %w", err)
	}
	return nil
}

// undoneBetween reports, for each of peers, whether an Undo left its pair with row
// alone: a record of the pair, either way round, while both still hold the values
// they held at the Undo. The record keeps keyed hashes (recordUndo): each row's plain
// hash is keyed under its scope's key to compare (a record written before migration
// 101 holds plain ones).
func (s *Service) undoneBetween(ctx context.Context, row *memrow.Row, peers []*memrow.Row) (map[string]bool, error) {
	if len(peers) == 0 {
		return nil, nil
	}
	sha := map[string]string{row.MemoryID: row.ContentSHA256}
	ids := make([]string, len(peers))
	all, users, shas := []string{row.MemoryID}, []string{row.UserID}, []string{row.ContentSHA256}
	for i, p := range peers {
		ids[i], sha[p.MemoryID] = p.MemoryID, p.ContentSHA256
		all, users, shas = append(all, p.MemoryID), append(users, p.UserID), append(shas, p.ContentSHA256)
	}
	rows, err := s.pool.Query(ctx, `WITH held AS (
			SELECT h.id, h.sha, coalesce(loom.content_hash($1, $2, loom.user_ref($1, h.user_id), h.sha), '') AS keyed
			FROM unnest($5::text[], $6::text[], $7::text[]) AS h(id, user_id, sha))
		SELECT u.loser_id::text, u.winner_id::text,
			CASE WHEN u.loser_sha <> '' AND u.loser_sha = l.keyed THEN l.sha ELSE u.loser_sha END,
			CASE WHEN u.winner_sha <> '' AND u.winner_sha = w.keyed THEN w.sha ELSE u.winner_sha END
		FROM loom.conflict_undos u
		LEFT JOIN held l ON l.id = u.loser_id::text
		LEFT JOIN held w ON w.id = u.winner_id::text
		WHERE u.org = $1 AND u.namespace = $2 AND ((u.loser_id = $3 AND u.winner_id = ANY($4)) OR (u.winner_id = $3 AND u.loser_id = ANY($4)))`,
		row.Org, row.Namespace, row.MemoryID, parseIDs(ids), all, users, shas)
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
