package app

import (
	"context"
	"time"

	"github.com/loomplane/loom/internal/watermarks"
)

// projectionLag is how far the serving projection is behind the Postgres journal.
type projectionLag = watermarks.Lag

// projectionLag compares every namespace's generation with the serving projection's
// watermark, naming the ten furthest behind.
func (n *Process) projectionLag(ctx context.Context) (projectionLag, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return watermarks.ReadLag(ctx, n.PG, n.Cfg.Pipeline.Projection, 10)
}
