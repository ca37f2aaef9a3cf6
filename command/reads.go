package command

import (
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/watermarks"
)

// queueHeads queues a read of stored head rows (SELECT row FROM loom.memory_current …)
// on b; into holds them, decoded, once the batch is sent.
func queueHeads(b *pgx.Batch, into *[]*memrow.Row, query string, args ...any) {
	b.Queue(query, args...).Query(func(rows pgx.Rows) error {
		var err error
		*into, err = heads.Collect(rows)
		return err
	})
}

// queueWatermark queues a read of the serving projection's watermark of a namespace
// on b: every revision at or below it is in ClickHouse.
func (s *Service) queueWatermark(b *pgx.Batch, org, ns string, into *int64) {
	watermarks.QueueRead(b, s.cfg.Projection, org, ns, into)
}
