package query

import (
	"context"

	"github.com/google/uuid"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// get is memory.get: the key's head from Postgres, current at the commit; with asOf,
// its version at that time (asof.go).
func (s *Service) get(ctx context.Context, p auth.Principal, id memrow.Identity, asOf string) (memoryView, error) {
	if asOf != "" {
		return s.getAsOf(ctx, p, id, asOf)
	}
	row, err := heads.Read(ctx, s.pool, id)
	if err != nil {
		return memoryView{}, httperr.Store("reading the head", err)
	}
	if row == nil || !row.Live(s.now()) {
		return memoryView{}, httperr.NotFound("memory not found")
	}
	return viewOf(row), nil
}

// getByID is memory.get_by_id. A memory id is not unique within an org (a restored
// namespace keeps its ids), so it answers only the one head heads.OneByID picks; a row
// it cannot reach, or one whose copy the read scope hides, is not found, never
// forbidden.
func (s *Service) getByID(ctx context.Context, p auth.Principal, memoryID uuid.UUID) (memoryView, error) {
	withID, err := heads.WithID(ctx, s.pool, p.Org, memoryID.String())
	if err != nil {
		return memoryView{}, httperr.Store("reading heads by id", err)
	}
	row := heads.OneByID(withID, s.now(), p.Reaches, p.ReadUserID)
	if row == nil || !(p.InSession(row.SessionID) || row.IsShared()) {
		return memoryView{}, httperr.NotFound("memory not found")
	}
	return viewOf(row), nil
}
