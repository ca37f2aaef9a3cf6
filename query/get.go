package query

import (
	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// handleGet is memory.get: the key's head from Postgres, current at the commit.
func (s *Service) handleGet(c *fiber.Ctx) error {
	p := auth.From(c)
	id, err := keyIdentity(c, p)
	if err != nil {
		return err
	}
	if asOf := c.Query("as_of"); asOf != "" {
		return s.getAsOf(c, p, id, asOf)
	}
	row, err := heads.Read(c.UserContext(), s.pool, id)
	if err != nil {
		return httperr.Store("reading the head", err)
	}
	if row == nil || !row.Live(s.now()) {
		return httperr.NotFound("memory not found")
	}
	return c.JSON(viewOf(row))
}

// handleGetByID is memory.get_by_id. A memory id is not unique within an org (a
// restored namespace keeps its ids), so it answers only when exactly one live head
// the caller reaches holds it; a row it cannot reach is not found, never forbidden.
func (s *Service) handleGetByID(c *fiber.Ctx) error {
	p := auth.From(c)
	memoryID, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return httperr.NotFound("memory not found")
	}
	rows, err := s.pool.Query(c.UserContext(), `SELECT namespace, user_id, row FROM loom.memory_current
		WHERE org = $1 AND memory_id = $2`, p.Org, memoryID)
	if err != nil {
		return httperr.Store("reading heads by id", err)
	}
	defer rows.Close()
	var found []*memrow.Row
	for rows.Next() {
		var ns, user string
		var raw []byte
		if err := rows.Scan(&ns, &user, &raw); err != nil {
			return httperr.Store("reading heads by id", err)
		}
		if !p.Reaches(ns) || !inReadScope(p, user) {
			continue
		}
		row, err := heads.Decode(raw)
		if err != nil {
			return httperr.Store("decoding a head", err)
		}
		if row.Live(s.now()) {
			found = append(found, row)
		}
	}
	if err := rows.Err(); err != nil {
		return httperr.Store("reading heads by id", err)
	}
	if len(found) != 1 {
		return httperr.NotFound("memory not found")
	}
	return c.JSON(viewOf(found[0]))
}
