package query

import (
	"context"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/knowledge/store"
)

// ListAnswer is a page of a namespace's documents in source URI order, without
// their content; NextAfter is the cursor of the next page ("" at the end).
type ListAnswer struct {
	Documents []Document `json:"documents"`
	NextAfter string     `json:"next_after,omitempty"`
}

// MaxList is the largest page a list answers.
const MaxList = 500

// list is knowledge.list: the documents the token sees, narrowed to the namespace's
// and userID's when it names one (readUsers).
func (s *Service) list(ctx context.Context, p auth.Principal, ns, userID string, o store.ListOptions) (*ListAnswer, error) {
	if o.Limit <= 0 {
		o.Limit = 100
	}
	if o.Limit > MaxList {
		return nil, httperr.Validation("limit", "limit is at most 500")
	}
	heads, err := store.List(ctx, s.pool, p.Org, ns, store.ListOptions{Prefix: o.Prefix, After: o.After, Limit: o.Limit + 1,
		IncludeDeleted: o.IncludeDeleted, Users: readUsers(p, userID)})
	if err != nil {
		return nil, httperr.Store("listing the documents", err)
	}
	ans := &ListAnswer{Documents: []Document{}}
	for i, h := range heads {
		if i == o.Limit {
			ans.NextAfter = heads[i-1].SourceURI
			break
		}
		ans.Documents = append(ans.Documents, documentOf(h, false))
	}
	return ans, nil
}
