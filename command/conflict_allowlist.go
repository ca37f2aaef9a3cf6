package command

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/snapshot"
)

// The conflict allowlist (memory-architecture, memory.set step 10: "an append_only
// policy and allowlisted pairs skip the check"): pairs of a namespace's memories a
// writer said are neither in conflict nor duplicates. conflict_allowlist.add (POST
// /v1/namespaces/{ns}/conflict-allowlist) lists a pair and clears what the judge made
// of it (a conflict flag between the two, a duplicate link of one to the other);
// conflict_allowlist.remove (DELETE, the same body) takes it off; conflict_allowlist.list
// (GET) lists them. memory.set's verdict leaves an allowlisted peer out (its answer
// names it allowlisted), so the pair is never merged, refused by a pin, refined,
// duplicated or flagged; the conflict resolver never judges it. The list is the
// namespace's policy: each change advances the org's policy generation, so a write
// judged under the list before the change is judged again at its commit.

// maxAllowlistPairs bounds a namespace's list: it is read with the namespace's policy
// and kept with it in every writer's cache.
const maxAllowlistPairs = 1000

const opAllowlistAdd = "conflict_allowlist.add"

type allowlistRequest struct {
	MemoryIDs []string `json:"memory_ids"`
}

// allowlistAnswer answers conflict_allowlist.add and .remove.
type allowlistAnswer struct {
	Namespace string    `json:"namespace"`
	MemoryIDs [2]string `json:"memory_ids"`
	// Listed: the pair is on the list after the call. Changed: the call added or removed it.
	Listed  bool `json:"listed"`
	Changed bool `json:"changed"`
	// Cleared names the rows whose flag against the other, or duplicate link to it,
	// the add cleared.
	Cleared []string `json:"cleared,omitempty"`
}

// allowlistPair is one pair as conflict_allowlist.list answers it.
type allowlistPair struct {
	MemoryIDs [2]string `json:"memory_ids"`
	AddedBy   string    `json:"added_by"`
	AddedAt   time.Time `json:"added_at"`
}

type allowlistList struct {
	Namespace string          `json:"namespace"`
	Pairs     []allowlistPair `json:"pairs"`
}

// orderedPair parses two memory ids into the list's order (a < b).
func orderedPair(x, y string) (uuid.UUID, uuid.UUID, error) {
	a, err := uuid.Parse(x)
	if err != nil {
		return uuid.UUID{}, uuid.UUID{}, err
	}
	b, err := uuid.Parse(y)
	if err != nil {
		return uuid.UUID{}, uuid.UUID{}, err
	}
	if a.String() > b.String() {
		a, b = b, a
	}
	return a, b, nil
}

// pairOf checks a request's pair: two different memory ids.
func (r allowlistRequest) pairOf() (uuid.UUID, uuid.UUID, error) {
	bad := httperr.Validation("memory_ids", "memory_ids must be two different memory ids")
	if len(r.MemoryIDs) != 2 {
		return uuid.UUID{}, uuid.UUID{}, bad
	}
	a, b, err := orderedPair(r.MemoryIDs[0], r.MemoryIDs[1])
	if err != nil || a == b {
		return uuid.UUID{}, uuid.UUID{}, bad
	}
	return a, b, nil
}

// addAllowedPair is conflict_allowlist.add: both memories must be live rows of the
// namespace the token acts on (404 otherwise, naming neither).
func (s *Service) addAllowedPair(ctx context.Context, p auth.Principal, ns string, req allowlistRequest) (*allowlistAnswer, error) {
	a, b, err := req.pairOf()
	if err != nil {
		return nil, err
	}
	pair, err := s.pairHeads(ctx, p, ns, a, b)
	if err != nil {
		return nil, err
	}
	users := []string{pair[0].UserID}
	if pair[1].UserID != pair[0].UserID {
		users = append(users, pair[1].UserID)
	}
	ans := &allowlistAnswer{Namespace: ns, MemoryIDs: [2]string{a.String(), b.String()}, Listed: true}
	tooMany := errors.New("too many pairs")
	err = s.changePolicy(ctx, p.Org, func(tx pgx.Tx) error {
		seq, err := generations.Read(ctx, tx, p.Org, ns)
		if err != nil {
			return fmt.Errorf("read the namespace's generation: %w", err)
		}
		added, n, err := insertAllowedPair(ctx, tx, p.Org, ns, a, b, users, seq, p.Actor())
		if err != nil {
			return fmt.Errorf("list the pair: %w", err)
		}
		if n > maxAllowlistPairs {
			return tooMany
		}
		ans.Changed = added
		return nil
	})
	if errors.Is(err, tooMany) {
		return nil, httperr.New(http.StatusUnprocessableEntity, httperr.CodeValidationFailed,
			fmt.Sprintf("a namespace's conflict allowlist holds at most %d pairs", maxAllowlistPairs)).With("field", "memory_ids")
	}
	if err != nil {
		return nil, httperr.Store("changing the conflict allowlist", err)
	}
	if ans.Cleared, err = s.clearAllowedPair(ctx, p, pair); err != nil {
		return nil, err
	}
	return ans, nil
}

// pairHeads reads the live heads of a pair's two memories in the namespace, each in the
// token's reach.
func (s *Service) pairHeads(ctx context.Context, p auth.Principal, ns string, a, b uuid.UUID) ([2]*memrow.Row, error) {
	var out [2]*memrow.Row
	found, err := heads.InNamespaceWithIDs(ctx, s.pool, p.Org, ns, []string{a.String(), b.String()})
	if err != nil {
		return out, httperr.Store("reading the pair's memories", err)
	}
	now := s.now()
	for i, id := range []uuid.UUID{a, b} {
		for _, h := range found {
			if h.MemoryID == id.String() && h.Live(now) && p.ActsOn(h.UserID) && p.InSession(h.SessionID) {
				out[i] = h
			}
		}
		if out[i] == nil {
			return out, httperr.NotFound("memory not found")
		}
	}
	return out, nil
}

// clearAllowedPair writes, over the pair's heads, the copies that drop what the judge
// made of the pair: a conflict flag of either against the other (a row left with none
// is active again) and a duplicate link of one to the other (the duplicate is served
// again). A head that moved meanwhile is read again, twice at most. It returns the
// memory ids of the rows it changed.
func (s *Service) clearAllowedPair(ctx context.Context, p auth.Principal, pair [2]*memrow.Row) ([]string, error) {
	for try := 0; try < 3; try++ {
		hs, err := heads.Many(ctx, s.pool, p.Org, pair[0].Namespace, []memrow.Identity{pair[0].Identity, pair[1].Identity})
		if err != nil {
			return nil, httperr.Store("reading the pair's memories", err)
		}
		var rows []*pending
		var cleared []string
		for i, was := range pair {
			h, other := hs[heads.IdentityKey(was.Identity)], pair[1-i].MemoryID
			if h == nil || h.MemoryID != was.MemoryID {
				continue
			}
			if row := unjudgedCopy(h, other); row != nil {
				row.Actor = p.Actor()
				rows = append(rows, &pending{own: true, op: opAllowlistAdd, event: events.TypeStatusChanged, row: row,
					readVersion: h.Version, readSeq: h.Seq})
				cleared = append(cleared, h.MemoryID)
			}
		}
		if len(rows) == 0 {
			return nil, nil
		}
		err = s.commit(ctx, &commitPlan{org: p.Org, namespace: pair[0].Namespace, rows: rows, policyGeneration: -1})
		switch {
		case errors.Is(err, errHeadMoved):
			continue
		case err != nil:
			return nil, commitError(err)
		}
		return cleared, nil
	}
	return nil, contended(errHeadMoved)
}

// unjudgedCopy is a copy of h without its flag against other and without a duplicate
// link to it; nil when h holds neither.
func unjudgedCopy(h *memrow.Row, other string) *memrow.Row {
	flagged := false
	for _, id := range h.ConflictWith {
		flagged = flagged || id == other
	}
	duplicate := h.Status == memrow.StatusDuplicate && h.DuplicateOf == other
	if !flagged && !duplicate {
		return nil
	}
	row := copyOf(h)
	if flagged {
		var kept []string
		for _, id := range h.ConflictWith {
			if id != other {
				kept = append(kept, id)
			}
		}
		row.ConflictWith = kept
		if len(kept) == 0 && row.Status == memrow.StatusConflicted {
			row.Status = memrow.StatusActive
		}
	}
	if duplicate {
		row.Status, row.DuplicateOf = memrow.StatusActive, ""
	}
	return row
}

// removeAllowedPair is conflict_allowlist.remove: the pair is judged again from the next
// write of either row on (the rows already written keep their verdicts).
func (s *Service) removeAllowedPair(ctx context.Context, p auth.Principal, ns string, req allowlistRequest) (*allowlistAnswer, error) {
	a, b, err := req.pairOf()
	if err != nil {
		return nil, err
	}
	if _, err := s.pairHeads(ctx, p, ns, a, b); err != nil && !p.ActsOn("") {
		// A token bound to one user removes only its user's pairs; a pair whose rows are
		// gone is removed by a token of every user.
		return nil, err
	}
	ans := &allowlistAnswer{Namespace: ns, MemoryIDs: [2]string{a.String(), b.String()}}
	err = s.changePolicy(ctx, p.Org, func(tx pgx.Tx) error {
		removed, err := deleteAllowedPair(ctx, tx, p.Org, ns, a, b)
		ans.Changed = removed
		return err
	})
	if err != nil {
		return nil, httperr.Store("changing the conflict allowlist", err)
	}
	return ans, nil
}

// listAllowlist is conflict_allowlist.list.
func (s *Service) listAllowlist(ctx context.Context, p auth.Principal, ns string) (*allowlistList, error) {
	pairs, err := s.listAllowedPairs(ctx, p.Org, ns, p.ReadUserID)
	if err != nil {
		return nil, httperr.Store("reading the conflict allowlist", err)
	}
	out := &allowlistList{Namespace: ns, Pairs: make([]allowlistPair, len(pairs))}
	for i, pr := range pairs {
		out.Pairs[i] = allowlistPair{MemoryIDs: [2]string{pr.a.String(), pr.b.String()}, AddedBy: pr.addedBy, AddedAt: pr.addedAt.UTC()}
	}
	return out, nil
}

// checkRestoredAllowlist checks a snapshot's allowlisted pairs: each two different
// memory ids, no more than a namespace holds.
func checkRestoredAllowlist(pairs [][2]string) error {
	if len(pairs) > maxAllowlistPairs {
		return fmt.Errorf("%w: the allowlist holds %d pairs, more than %d", snapshot.ErrMalformed, len(pairs), maxAllowlistPairs)
	}
	for i, pair := range pairs {
		if _, _, err := (allowlistRequest{MemoryIDs: pair[:]}).pairOf(); err != nil {
			return fmt.Errorf("%w: allowlist pair %d is not two different memory ids", snapshot.ErrMalformed, i+1)
		}
	}
	return nil
}

// restoreAllowedPairs lists again, after a restore wrote its memories, the snapshot's
// allowlisted pairs whose two rows the namespace holds live (a row an erasure or the
// blacklist kept out takes its pairs with it), up to the namespace's bound, as one
// policy change.
func (s *Service) restoreAllowedPairs(ctx context.Context, p auth.Principal, ns string, pairs [][2]string) error {
	if len(pairs) == 0 {
		return nil
	}
	var ids []string
	for _, pair := range pairs {
		ids = append(ids, pair[0], pair[1])
	}
	found, err := heads.InNamespaceWithIDs(ctx, s.pool, p.Org, ns, ids)
	if err != nil {
		return httperr.Store("reading the allowlisted pairs' memories", err)
	}
	now := s.now()
	live := map[string]*memrow.Row{}
	for _, h := range found {
		if h.Live(now) {
			live[h.MemoryID] = h
		}
	}
	err = s.changePolicy(ctx, p.Org, func(tx pgx.Tx) error {
		seq, err := generations.Read(ctx, tx, p.Org, ns)
		if err != nil {
			return fmt.Errorf("read the namespace's generation: %w", err)
		}
		for _, pair := range pairs {
			a, b, _ := orderedPair(pair[0], pair[1])
			x, y := live[a.String()], live[b.String()]
			if x == nil || y == nil {
				continue
			}
			users := []string{x.UserID}
			if y.UserID != x.UserID {
				users = append(users, y.UserID)
			}
			added, n, err := insertAllowedPair(ctx, tx, p.Org, ns, a, b, users, seq, p.Actor())
			if err != nil {
				return fmt.Errorf("list the pair: %w", err)
			}
			if n > maxAllowlistPairs && added {
				// The namespace's list is full: this pair and the rest stay off it.
				_, err := deleteAllowedPair(ctx, tx, p.Org, ns, a, b)
				return err
			}
		}
		return nil
	})
	if err != nil {
		return httperr.Store("restoring the conflict allowlist", err)
	}
	return nil
}
