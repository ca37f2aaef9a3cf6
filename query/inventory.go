package query

import (
	"context"
	"net/http"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
)

// namespace.inventory counts a namespace's memories from the authority's heads: the
// live ones by type, status, user and tag, and the deleted and expired ones. A token
// bound to one user counts that user's rows alone. Read from Postgres, not at the
// barrier from ClickHouse (postgres-authority.md): the heads are what reads serve, and
// the answer waits for no projection. Tags are in each row's sealed text, so they are
// counted over a sample of inventoryTagSample live heads.

// inventoryTagSample bounds the heads whose tags namespace.inventory opens.
const inventoryTagSample = 10000

// inventoryAnswer is what namespace.inventory answers.
type inventoryAnswer struct {
	Namespace string `json:"namespace"`
	*heads.Inventory
	TagSample int `json:"tag_sample"`
}

// inventory is namespace.inventory.
func (s *Service) inventory(ctx context.Context, p auth.Principal, ns string) (*inventoryAnswer, error) {
	if p.ReadSessionID != "" {
		return nil, httperr.New(http.StatusForbidden, httperr.CodePermissionDenied, "namespace.inventory counts every session's memories; this token reads one session's")
	}
	if err := s.refuseDeleted(ctx, p.Org, ns); err != nil {
		return nil, err
	}
	inv, err := heads.CountInventory(ctx, s.pool, p.Org, ns, p.ReadUserID, inventoryTagSample)
	if err != nil {
		return nil, httperr.Store("counting the namespace's memories", err)
	}
	return &inventoryAnswer{Namespace: ns, Inventory: inv, TagSample: inventoryTagSample}, nil
}
