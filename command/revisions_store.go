package command

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/loomplane/loom/internal/heads"
)

// The write side's statements of loom.memory_revisions and loom.revision_keys.

// gapSQL reads the revisions committed after a seq, in seq order, at most a limit.
const gapSQL = `SELECT seq, ` + heads.Row + ` FROM loom.memory_revisions
	WHERE org = $1 AND namespace = $2 AND seq > $3 ORDER BY seq LIMIT $4`

// queueGap queues the read of the revisions committed after seq, at most limit, into gap.
func queueGap(b *pgx.Batch, org, ns string, after int64, limit int, gap *[]gapRevision) {
	b.Queue(gapSQL, org, ns, after, limit).Query(func(rows pgx.Rows) error {
		var err error
		*gap, err = scanGap(rows)
		return err
	})
}

func readGap(ctx context.Context, q heads.Querier, org, ns string, after int64, limit int) ([]gapRevision, error) {
	rows, err := q.Query(ctx, gapSQL, org, ns, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read the admission gap: %w", err)
	}
	defer rows.Close()
	return scanGap(rows)
}

// scanGap keeps the gap's revisions that can still be peers: neither cleared nor
// redacted.
func scanGap(rows pgx.Rows) ([]gapRevision, error) {
	var gap []gapRevision
	for rows.Next() {
		var g gapRevision
		var raw []byte
		if err := rows.Scan(&g.seq, &raw); err != nil {
			return nil, fmt.Errorf("read the admission gap: %w", err)
		}
		if raw == nil {
			continue // cleared: nothing left to be a peer
		}
		var err error
		if g.row, err = heads.Decode(raw); err != nil {
			return nil, err
		}
		if g.row.Redacted {
			continue // scrubbed: nothing left to be a peer
		}
		gap = append(gap, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the admission gap: %w", err)
	}
	return gap, nil
}
