package command

import (
	"context"

	"github.com/loomplane/loom/internal/extractqueue"
	"github.com/loomplane/loom/internal/outbox"
)

// requestRecordIn is requestRecord under ctx, as the queue's retries and requeues take
// it: a record names its user by reference, which may read the org's key.
func (s *Service) requestRecordIn(ctx context.Context) func(extractqueue.Queued) (outbox.Record, error) {
	return func(q extractqueue.Queued) (outbox.Record, error) { return s.requestRecord(ctx, q) }
}
