package query

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/route"
)

// bulkGetMax bounds one memory.bulk_get, as memory.bulk_set's entries are bounded.
const bulkGetMax = 1000

// bulkGetKey names one key of the namespace; absent identity fields are "-" (a token
// bound to one user reads that user's keys).
type bulkGetKey struct {
	MemoryKey string `json:"memory_key"`
	Agent     string `json:"agent"`
	UserID    string `json:"user_id"`
	SessionID string `json:"session_id"`
}

// bulkGetRequest is POST /v1/namespaces/{ns}/memories:bulkGet: keys, memory ids, or both.
type bulkGetRequest struct {
	Keys []bulkGetKey `json:"keys"`
	IDs  []string     `json:"ids"`
}

// bulkGetAnswer holds each live head asked for once, keys first in the order asked,
// then the heads the ids hold; what was not found (or is out of the token's reach) is
// listed as asked.
type bulkGetAnswer struct {
	Memories []memoryView `json:"memories"`
	Missing  bulkMissing  `json:"missing"`
}

type bulkMissing struct {
	Keys []bulkGetKey `json:"keys"`
	IDs  []string     `json:"ids"`
}

// bulkGet is memory.bulk_get: many point reads in one call, from the Postgres heads, as
// memory.get answers each (current at the commit). An id names every live head of the
// namespace holding it within the token's read scope (a namespace restored into itself
// under another agent holds an id twice).
func (s *Service) bulkGet(ctx context.Context, p auth.Principal, ns string, req bulkGetRequest) (*bulkGetAnswer, error) {
	if err := p.Namespace(ns); err != nil {
		return nil, err
	}
	if n := len(req.Keys) + len(req.IDs); n == 0 || n > bulkGetMax {
		return nil, httperr.Validation("keys", fmt.Sprintf("ask for 1 to %d keys and ids in all", bulkGetMax))
	}
	ids, other, err := keyIdentities(p, ns, req.Keys)
	if err != nil {
		return nil, err
	}
	memoryIDs := make([]uuid.UUID, len(req.IDs))
	for i, id := range req.IDs {
		u, err := uuid.Parse(id)
		if err != nil {
			return nil, httperr.Validation(fmt.Sprintf("ids[%d]", i), "not a memory id (a UUID)")
		}
		memoryIDs[i] = u
	}
	byKey := map[string]*memrow.Row{}
	if len(ids) > 0 {
		var err error
		if byKey, err = heads.Many(ctx, s.pool, p.Org, ns, ids); err != nil {
			return nil, httperr.Store("reading the heads", err)
		}
	}
	byID := map[string][]*memrow.Row{}
	if len(memoryIDs) > 0 {
		idStrings := make([]string, len(memoryIDs))
		for i, u := range memoryIDs {
			idStrings[i] = u.String()
		}
		found, err := heads.InNamespaceWithIDs(ctx, s.pool, p.Org, ns, idStrings)
		if err != nil {
			return nil, httperr.Store("reading the heads by id", err)
		}
		// A restored copy shares its id with another head: serve them in key order.
		slices.SortFunc(found, func(a, b *memrow.Row) int {
			return strings.Compare(heads.IdentityKey(a.Identity), heads.IdentityKey(b.Identity))
		})
		for _, r := range found {
			byID[r.MemoryID] = append(byID[r.MemoryID], r)
		}
	}
	now := s.now()
	ans := &bulkGetAnswer{Memories: []memoryView{}, Missing: bulkMissing{Keys: []bulkGetKey{}, IDs: []string{}}}
	served := map[string]bool{}
	serve := func(r *memrow.Row) bool {
		if r == nil || !r.Live(now) || !inReadScope(p, r) {
			return false
		}
		if k := heads.IdentityKey(r.Identity); !served[k] {
			served[k] = true
			ans.Memories = append(ans.Memories, viewOf(r))
		}
		return true
	}
	for i, id := range ids {
		if other[i] || !serve(byKey[heads.IdentityKey(id)]) {
			ans.Missing.Keys = append(ans.Missing.Keys, req.Keys[i])
		}
	}
	for i, u := range memoryIDs {
		found := false
		for _, r := range byID[u.String()] {
			found = serve(r) || found
		}
		if !found {
			ans.Missing.IDs = append(ans.Missing.IDs, req.IDs[i])
		}
	}
	return ans, nil
}

// keyIdentities resolves a bulk read's keys to identities the token may name, and
// which of them name another user's row (other); a bad key is the 422 naming keys[i].
func keyIdentities(p auth.Principal, ns string, keys []bulkGetKey) ([]memrow.Identity, []bool, error) {
	ids := make([]memrow.Identity, len(keys))
	other := make([]bool, len(keys))
	for i, k := range keys {
		ids[i], other[i] = route.Identity(p, ns, k.MemoryKey, route.Names{Agent: k.Agent, UserID: k.UserID, SessionID: k.SessionID})
		if err := ids[i].Validate(); err != nil {
			var fe *memrow.FieldError
			if errors.As(err, &fe) {
				fe.Field = fmt.Sprintf("keys[%d].%s", i, fe.Field)
			}
			return nil, nil, err
		}
	}
	return ids, other, nil
}
