package command

import (
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/route"
)

// The by-id forms of memory.verify and memory.redact (POST /v1/memories/{id}:verify,
// POST /v1/memories/{id}:redact), addressed by the org-wide memory id as
// memory.update_by_id is (memory-architecture, Invariants: "memory.verify (by id)
// resolve[s] the id's namespace ... before the read; memory.redact checks ... after
// it"). The id resolves to the one live head the token reaches (headByID): a row it
// cannot reach answers 404, never 403. Then each runs as its key form does.

// keyOf is the route names of a head's key: the identity a key form would name.
func keyOf(h *memrow.Row) route.Names {
	return route.Names{Agent: h.Agent, UserID: h.UserID, SessionID: h.SessionID}
}
