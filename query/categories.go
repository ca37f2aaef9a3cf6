package query

import (
	"context"
	"net/http"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
)

// The categories read (the seed's loom.fetch_namespace_categories, the taxonomy the
// extractor tags facts from, here a route of its own): each category the namespace's
// live heads hold, with how many hold it, and how many hold none. Read from the
// authority's heads, as namespace.inventory is; a token bound to one user counts that
// user's rows and the shared scope's. memory.assign_category (command/) writes links.

// categoriesSample bounds the heads the read opens.
const categoriesSample = 10000

// categoriesAnswer is what the categories read answers.
type categoriesAnswer struct {
	Namespace string `json:"namespace"`
	*heads.Categories
}

// categories is the categories read.
func (s *Service) categories(ctx context.Context, p auth.Principal, ns string) (*categoriesAnswer, error) {
	if p.ReadSessionID != "" {
		return nil, httperr.New(http.StatusForbidden, httperr.CodePermissionDenied, "the categories read counts every session's memories; this token reads one session's")
	}
	if err := s.refuseDeleted(ctx, p.Org, ns); err != nil {
		return nil, err
	}
	cats, err := heads.CountCategories(ctx, s.pool, p.Org, ns, p.ReadUserID, categoriesSample)
	if err != nil {
		return nil, httperr.Store("counting the namespace's categories", err)
	}
	return &categoriesAnswer{Namespace: ns, Categories: cats}, nil
}
