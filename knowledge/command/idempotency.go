package command

import (
	"context"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/idempotency"
)

// Idempotency-Key on the knowledge writes: the same table and the same answers as
// memory's writes, through internal/idempotency, which owns loom.idempotency. A write
// that commits stores its answer in the commit's own transaction (guardOf), under its
// request's token only, so a retry replays exactly what committed, and a request a
// retry took over commits nothing.

// Codes of the idempotency table, as memory's writes answer them.
const (
	CodeIdempotentConflict   = idempotency.CodeConflict
	CodeIdempotentInProgress = idempotency.CodeInProgress
	CodeIdempotentTakenOver  = idempotency.CodeTakenOver
)

// newIdempotency is the store the knowledge writes run under their keys with: an
// upsert of the head's own content committed nothing, and lets a retry run again.
func newIdempotency(s *Service) *idempotency.Store {
	return idempotency.New(s.pool, idempotency.Options{
		Lease: s.cfg.IdempotencyLease,
		Committed: func(ans any) bool {
			w, ok := ans.(*Written)
			return !ok || !w.Unchanged
		},
		Keys: s.keys,
	}, s.log)
}

// idempotent answers a write run under the request's Idempotency-Key: a replay
// answers the stored answer with Idempotent-Replay: true.
func (s *Service) idempotent(c *fiber.Ctx, p auth.Principal, op string, run func(ctx context.Context, hold *idempotency.Hold) (any, error)) error {
	ctx := c.UserContext()
	r, err := s.idem.Run(ctx, idempotency.KeyOf(c, p, op), func(hold *idempotency.Hold) (any, error) { return run(ctx, hold) })
	switch {
	case err != nil:
		return err
	case r.Body == nil:
		return c.JSON(r.Answer)
	case r.Replay:
		c.Set("Idempotent-Replay", "true")
	}
	return c.Type("json").Send(r.Body)
}

// guardOf is the commit guard that stores the answer answer builds from what the
// commit writes under hold (nil without a key).
func guardOf(hold *idempotency.Hold, answer func([]Written) any) guard {
	if hold == nil {
		return nil
	}
	return func(ctx context.Context, tx pgx.Tx, _ *pgx.Batch, w []Written) error {
		return idempotency.MarkDone(ctx, tx, hold, answer(w))
	}
}
