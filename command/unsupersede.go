package command

import (
	"context"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// memory.unsupersede (POST .../memories/{key}:unsupersede) is the Undo of a
// retirement, the conflict resolver's (memory.auto_supersede) or a write's: the row
// comes back as memory.restore brings a supersession back, with its search document,
// and in the same transaction, under the key's lock, a loom.conflict_undos record
// names the pair and the values both rows hold. While both still hold them, the
// resolver leaves the pair alone from either side. A record that cannot be written
// restores nothing: the commit rolls back and the Undo answers 503.
const opUnsupersede = "memory.unsupersede"

func unsupersedeChange(ctx context.Context, s *Service, c *copyWrite) error {
	if c.head.Status != memrow.StatusSuperseded || c.head.SupersededBy == "" {
		return httperr.New(http.StatusConflict, CodePreconditionFailed, "the memory is not superseded: there is no retirement to undo")
	}
	winner := c.head.SupersededBy
	if err := restoreChange(ctx, s, c); err != nil {
		return err
	}
	c.extra["undid_retirement_by"] = winner
	row := c.row
	c.inTx = func(ctx context.Context, tx pgx.Tx) error {
		return recordUndo(ctx, tx, row, winner)
	}
	return nil
}

// restoreOrUndoChange is memory.restore: a row the conflict resolver retired
// (memory.auto_supersede) comes back as its Undo brings it back, with the
// loom.conflict_undos record, so the resolver does not judge the pair again
// (memory-architecture, "The conflict resolver": an Undo writes that record); any
// other deletion, supersession or rejection is restored as before.
func restoreOrUndoChange(ctx context.Context, s *Service, c *copyWrite) error {
	if c.head.Status == memrow.StatusSuperseded && c.head.SupersededBy != "" {
		op, err := s.retiredBy(ctx, c.head)
		if err != nil {
			return httperr.Store("reading which op retired the memory", err)
		}
		if op == opAutoSupersede {
			return unsupersedeChange(ctx, s, c)
		}
	}
	return restoreChange(ctx, s, c)
}

// opAutoSupersede is the conflict resolver's retirement (workers/resolver_act.go).
const opAutoSupersede = "memory.auto_supersede"
