package relay

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/metrics"
	"github.com/loomplane/loom/internal/outbox"
)

// ReadBacklog reads what waits in the outbox for a relay: every process answers it
// in health?include=postgres, whatever its roles.
func ReadBacklog(ctx context.Context, pool *pgxpool.Pool) (outbox.Backlog, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return outbox.ReadBacklog(ctx, pool)
}

// RegisterBacklogGauges registers the outbox's gauges in reg, read at scrape time.
func RegisterBacklogGauges(reg *metrics.Registry, pool *pgxpool.Pool) {
	read := func(ctx context.Context) (outbox.Backlog, error) { return ReadBacklog(ctx, pool) }
	metrics.GaugesOf(reg, read, []metrics.StatGauge[outbox.Backlog]{
		{Name: "loom_outbox_depth", Help: "Outbox records not yet published to Kafka.", Of: func(s outbox.Backlog) int64 { return s.Depth }},
		{Name: "loom_outbox_parked", Help: "Outbox records parked after Kafka refused them (a loom.parked placeholder took each one's seq).",
			Of: func(s outbox.Backlog) int64 { return s.Parked }},
	})
}
