package spend

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// This file owns loom.model_call_holds, the per-org switch for model calls: the
// ledger's Spent reads it (a held org's allowance is capped until it is released),
// the workers' claims leave a held org out in their own statement
// (workers/workqueue.go), and command's org.model_calls sets and clears it here.

// Querier is what the hold's statements run on: a pool or a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Hold is an org's hold of its model calls.
type Hold struct {
	HeldAt time.Time
	HeldBy string
}

// ReadHold reads an org's hold, or nil when its model calls run.
func ReadHold(ctx context.Context, q Querier, org string) (*Hold, error) {
	var h Hold
	err := q.QueryRow(ctx, `SELECT held_at, held_by FROM loom.model_call_holds WHERE org = $1`, org).Scan(&h.HeldAt, &h.HeldBy)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the org's model-call hold: %w", err)
	}
	return &h, nil
}

// SetHold holds an org's model calls (kept as it was when already held) and answers the
// hold.
func SetHold(ctx context.Context, q Querier, org, actor string) (*Hold, error) {
	var h Hold
	err := q.QueryRow(ctx, `INSERT INTO loom.model_call_holds (org, held_by) VALUES ($1, $2)
		ON CONFLICT (org) DO UPDATE SET org = EXCLUDED.org
		RETURNING held_at, held_by`, org, actor).Scan(&h.HeldAt, &h.HeldBy)
	if err != nil {
		return nil, fmt.Errorf("hold the org's model calls: %w", err)
	}
	return &h, nil
}

// ClearHold releases an org's model calls; it reports whether they were held.
func ClearHold(ctx context.Context, q Querier, org string) (bool, error) {
	tag, err := q.Exec(ctx, `DELETE FROM loom.model_call_holds WHERE org = $1`, org)
	if err != nil {
		return false, fmt.Errorf("release the org's model calls: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}
