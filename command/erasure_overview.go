package command

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/loomplane/loom/internal/heads"
)

// ErasureOverview is the deployment's erasures as the operator reads them: how many
// are running, completed and failed, and the latest ones with their last census. It
// names an erasure's org, kind and counts, never the user or namespace it erased.
type ErasureOverview struct {
	ByStatus map[string]int64 `json:"by_status"`
	Latest   []ErasureSummary `json:"latest"`
}

// ErasureSummary is one saga as the overview lists it.
type ErasureSummary struct {
	Org          string           `json:"org"`
	ID           string           `json:"id"`
	Status       string           `json:"status"`
	Kind         string           `json:"kind"`
	Namespaces   int              `json:"namespaces"`
	Purge        bool             `json:"purge"`
	Attempts     int              `json:"attempts"`
	ResidueCount *int64           `json:"residue_count"`
	Census       map[string]int64 `json:"census"`
	Errored      bool             `json:"errored"` // a run recorded an error (its text stays in the org's erasure.get)
	RequestedAt  time.Time        `json:"requested_at"`
	FinishedAt   *time.Time       `json:"finished_at"`
}

// ReadErasureOverview counts the ledger's sagas by status and reads the latest limit.
func ReadErasureOverview(ctx context.Context, q heads.Querier, limit int) (ErasureOverview, error) {
	o := ErasureOverview{ByStatus: map[string]int64{"running": 0, "completed": 0, "failed": 0}, Latest: []ErasureSummary{}}
	rows, err := q.Query(ctx, `SELECT status, count(*) FROM loom.erasure_ledger GROUP BY status`)
	if err != nil {
		return o, fmt.Errorf("count erasures: %w", err)
	}
	for rows.Next() {
		var status string
		var n int64
		if err := rows.Scan(&status, &n); err != nil {
			rows.Close()
			return o, fmt.Errorf("count erasures: %w", err)
		}
		o.ByStatus[status] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return o, fmt.Errorf("count erasures: %w", err)
	}
	rows, err = q.Query(ctx, `SELECT org, id::text, status, coalesce(scope->>'kind', ''), fences, purge, attempts, residue_count, census,
			last_error IS NOT NULL, requested_at, finished_at
		FROM loom.erasure_ledger ORDER BY requested_at DESC, org, id LIMIT $1`, limit)
	if err != nil {
		return o, fmt.Errorf("read the latest erasures: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e ErasureSummary
		var fences, census []byte
		if err := rows.Scan(&e.Org, &e.ID, &e.Status, &e.Kind, &fences, &e.Purge, &e.Attempts, &e.ResidueCount, &census,
			&e.Errored, &e.RequestedAt, &e.FinishedAt); err != nil {
			return o, fmt.Errorf("read the latest erasures: %w", err)
		}
		var fenced map[string]int64
		if len(fences) > 0 {
			if err := json.Unmarshal(fences, &fenced); err != nil {
				return o, fmt.Errorf("read erasure %s's fences: %w", e.ID, err)
			}
		}
		e.Namespaces = len(fenced)
		if len(census) > 0 {
			if err := json.Unmarshal(census, &e.Census); err != nil {
				return o, fmt.Errorf("read erasure %s's census: %w", e.ID, err)
			}
		}
		o.Latest = append(o.Latest, e)
	}
	return o, rows.Err()
}
