package app

import (
	"context"
	"time"
)

// failureStats counts the serving projection's recorded failures (projector/failures.go).
type failureStats struct {
	Failed     int64 `json:"failed"`     // records it could not apply
	Held       int64 `json:"held"`       // records held behind them
	Namespaces int64 `json:"namespaces"` // namespaces held, their watermarks stopped
}

func (n *Process) failureStats(ctx context.Context) (failureStats, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var s failureStats
	err := n.PG.QueryRow(ctx, `SELECT count(*) FILTER (WHERE NOT held), count(*) FILTER (WHERE held),
			count(DISTINCT (org, namespace))
		FROM loom.projection_failures WHERE projection = $1`, n.Cfg.Pipeline.Projection).Scan(&s.Failed, &s.Held, &s.Namespaces)
	return s, err
}
