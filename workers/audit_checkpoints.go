package workers

import (
	"context"
	"errors"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/auditchain"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/metrics"
	"github.com/loomplane/loom/internal/periodic"
)

// RunAuditCheckpoints is the paced audit pass (memory-architecture, "Audit rows"): every
// LOOM_AUDIT_CHECKPOINT_INTERVAL_MS it verifies each namespace's audit chain in
// ClickHouse past its last checkpoint and records the row it reached in
// loom.audit_checkpoints (internal/auditchain). A chain broken since is logged, counted
// and not checkpointed over. Passes of several processes are harmless: a checkpoint
// already recorded at a seq stands, and both would record the same one.
func RunAuditCheckpoints(ctx context.Context, conn *ch.Conn, pool *pgxpool.Pool, cfg config.AuditCheckpoints, reg *metrics.Registry, log *slog.Logger) {
	passes := reg.Counter("loom_audit_checkpoint_passes_total", "Audit checkpoint passes, by outcome (ok, broken, failed).", "outcome")
	pass := func() {
		n, err := auditchain.CheckpointPass(ctx, conn, pool, cfg.MaxRows)
		var brk *auditchain.Break
		switch {
		case ctx.Err() != nil:
		case err == nil:
			passes.With("ok").Inc()
			if n > 0 {
				log.Debug("audit: checkpointed", "namespaces", n)
			}
		case errors.As(err, &brk):
			passes.With("broken").Inc()
			log.Error("audit: a namespace's audit chain is broken; run loomd audit verify", "err", err)
		default:
			passes.With("failed").Inc()
			log.Warn("audit: checkpoint pass failed; the next pass tries again", "err", err)
		}
	}
	pass()
	periodic.Every(ctx, cfg.Interval, pass)
}
