package query

import (
	"context"
	"fmt"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// statusesRequest is POST /v1/namespaces/{ns}/memories:statuses: the keys, named as
// memory.bulk_get names them.
type statusesRequest struct {
	Keys []bulkGetKey `json:"keys"`
}

// Where a key stands, beside its status.
const (
	keyLive    = "live"
	keyDeleted = "deleted"
	keyExpired = "expired"
	keyMissing = "missing"
)

// keyStatus is one key's status, in the order asked.
type keyStatus struct {
	bulkGetKey
	// State is live, deleted, expired (past expires_at or valid_to) or missing (no head,
	// or out of the token's read scope); the fields below are empty when missing.
	State        string        `json:"state"`
	Status       memrow.Status `json:"status,omitempty"`
	MemoryID     string        `json:"memory_id,omitempty"`
	Version      int64         `json:"version,omitempty"`
	VersionText  string        `json:"version_text,omitempty"`
	SupersededBy string        `json:"superseded_by,omitempty"`
	DuplicateOf  string        `json:"duplicate_of,omitempty"`
	ConflictWith []string      `json:"conflict_with,omitempty"`
	Pinned       bool          `json:"pinned,omitempty"`
	Locked       bool          `json:"locked,omitempty"`
}

type statusesAnswer struct {
	Statuses []keyStatus `json:"statuses"`
}

// statuses is memory.statuses: a key set's statuses in one read of the Postgres heads,
// current at the commit, with no text.
func (s *Service) statuses(ctx context.Context, p auth.Principal, ns string, req statusesRequest) (*statusesAnswer, error) {
	if err := p.Namespace(ns); err != nil {
		return nil, err
	}
	if n := len(req.Keys); n == 0 || n > bulkGetMax {
		return nil, httperr.Validation("keys", fmt.Sprintf("ask for 1 to %d keys", bulkGetMax))
	}
	ids, other, err := keyIdentities(p, ns, req.Keys)
	if err != nil {
		return nil, err
	}
	byKey, err := heads.Many(ctx, s.pool, p.Org, ns, ids)
	if err != nil {
		return nil, httperr.Store("reading the heads", err)
	}
	now := s.now()
	ans := &statusesAnswer{Statuses: make([]keyStatus, len(ids))}
	for i, id := range ids {
		st := keyStatus{bulkGetKey: bulkGetKey{MemoryKey: id.MemoryKey, Agent: id.Agent, UserID: id.UserID, SessionID: id.SessionID}, State: keyMissing}
		r := byKey[heads.IdentityKey(id)]
		if !other[i] && r != nil && inReadScope(p, r) {
			st.State = keyLive
			switch {
			case r.Tombstone:
				st.State = keyDeleted
			case r.Expired(now):
				st.State = keyExpired
			}
			st.Status, st.MemoryID, st.Version, st.VersionText = r.Status, r.MemoryID, r.Version, memrow.VersionText(r.Version)
			st.SupersededBy, st.DuplicateOf, st.ConflictWith, st.Pinned, st.Locked = r.SupersededBy, r.DuplicateOf, r.ConflictWith, r.Pinned, r.Locked
		}
		ans.Statuses[i] = st
	}
	return ans, nil
}
