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
// namespace keeps its ids), so it answers only when exactly one live head the caller
// reaches holds it; a row it cannot reach is not found, never forbidden.
func (s *Service) getByID(ctx context.Context, p auth.Principal, memoryID uuid.UUID) (memoryView, error) {
	rows, err := s.pool.Query(ctx, `SELECT namespace, user_id, row FROM loom.memory_current
		WHERE org = $1 AND memory_id = $2`, p.Org, memoryID)
	if err != nil {
		return memoryView{}, httperr.Store("reading heads by id", err)
	}
	defer rows.Close()
	var found []*memrow.Row
	for rows.Next() {
		var ns, user string
		var raw []byte
		if err := rows.Scan(&ns, &user, &raw); err != nil {
			return memoryView{}, httperr.Store("reading heads by id", err)
		}
		if !p.Reaches(ns) || !inReadScope(p, user) {
			continue
		}
		row, err := heads.Decode(raw)
		if err != nil {
			return memoryView{}, httperr.Store("decoding a head", err)
		}
		if row.Live(s.now()) {
			found = append(found, row)
		}
	}
	if err := rows.Err(); err != nil {
		return memoryView{}, httperr.Store("reading heads by id", err)
	}
	if len(found) != 1 {
		return memoryView{}, httperr.NotFound("memory not found")
	}
	return viewOf(found[0]), nil
}
