package projector

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/metrics"
	"github.com/loomplane/loom/internal/watermarks"
)

// Lag is how far a projection is behind the Postgres journal.
type Lag = watermarks.Lag

// lagNamed is how many of the namespaces furthest behind a lag names.
const lagNamed = 10

// ReadLag reads how far projection is behind: every namespace's generation against
// its watermark, the ten furthest behind named.
func ReadLag(ctx context.Context, pool *pgxpool.Pool, projection string) (Lag, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return watermarks.ReadLag(ctx, pool, projection, lagNamed)
}

// ReadFailureCounts counts projection's recorded failures (failures.go).
func ReadFailureCounts(ctx context.Context, pool *pgxpool.Pool, projection string) (FailureCounts, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return countFailures(ctx, pool, projection)
}

// RegisterHealthGauges registers the gauges of projection's failures and lag in reg,
// read at scrape time. Per-namespace lag would be a series per namespace: /metrics
// carries the totals and the furthest namespace, health?include=lag names the ten
// furthest.
func RegisterHealthGauges(reg *metrics.Registry, pool *pgxpool.Pool, projection string) {
	failures := func(ctx context.Context) (FailureCounts, error) { return ReadFailureCounts(ctx, pool, projection) }
	metrics.GaugesOf(reg, failures, []metrics.StatGauge[FailureCounts]{
		{Name: "loom_projection_failed_records", Help: "Records the serving projection could not apply, recorded for the repair pass.",
			Of: func(s FailureCounts) int64 { return s.Failed }},
		{Name: "loom_projection_held_records", Help: "Records the serving projection holds behind a failure of their namespace.",
			Of: func(s FailureCounts) int64 { return s.Held }},
		{Name: "loom_projection_held_namespaces", Help: "Namespaces whose watermark a recorded failure holds (their searches answer PROJECTION_BEHIND).",
			Of: func(s FailureCounts) int64 { return s.Namespaces }},
	})
	lag := func(ctx context.Context) (Lag, error) { return ReadLag(ctx, pool, projection) }
	metrics.GaugesOf(reg, lag, []metrics.StatGauge[Lag]{
		{Name: "loom_projection_namespaces_behind", Help: "Namespaces whose serving-projection watermark is below their Postgres generation.",
			Of: func(l Lag) int64 { return l.NamespacesBehind }},
		{Name: "loom_projection_seqs_behind", Help: "Seqs the serving projection has yet to apply, summed over the namespaces.",
			Of: func(l Lag) int64 { return l.SeqsBehind }},
		{Name: "loom_projection_max_seqs_behind", Help: "Seqs the serving projection has yet to apply in the namespace furthest behind.",
			Of: func(l Lag) int64 {
				if len(l.Behind) == 0 {
					return 0
				}
				return l.Behind[0].Generation - l.Behind[0].Watermark
			}},
	})
}
