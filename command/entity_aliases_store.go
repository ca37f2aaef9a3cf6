package command

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/erasure"
)

// The write side's statements of loom.entity_aliases: an erasure's and a redaction's
// deletes. The entity extractor (workers/entities.go) owns the table's other
// statements; command cannot call it (workers imports command).

// queueForgetAliases queues the deletion of the entity aliases a memory introduced (its
// redaction: they were read in its text); the entity extractor (workers/) records them.
func queueForgetAliases(b *pgx.Batch, org, ns, memoryID string) {
	b.Queue(`DELETE FROM loom.entity_aliases WHERE org = $1 AND namespace = $2 AND memory_id = $3`, org, ns, memoryID)
}

// eraseEntityAliases deletes the entity aliases in an erasure's scope (args as
// erasure.ScopeParams names them), returning how many.
func eraseEntityAliases(ctx context.Context, tx pgx.Tx, args []any) (int64, error) {
	tag, err := tx.Exec(ctx, erasure.ScopeParams+` DELETE FROM loom.entity_aliases t USING p WHERE `+pgScope("loom.entity_aliases"), args...)
	return tag.RowsAffected(), err
}
