package query

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/revisions"
	"github.com/loomplane/loom/internal/route"
)

const (
	timelineKeysDefault = 20
	timelineKeysMax     = 100
)

// timelineCall is GET /v1/namespaces/{ns}/timeline's query string: a key's timeline
// (key, and the names that identify it), or a subject's (entity, and the scope's
// names), or, with neither, the scope's facts.
type timelineCall struct {
	namespace, key, entity, agent, userID, sessionID, limit string
}

// timelineEntry is one version of a fact, placed in valid time: from valid_at (or,
// for a fact that states none, when it was written) to valid_to, or to the next
// version of its key.
type timelineEntry struct {
	versionView
	Cite      string     `json:"cite"`
	MemoryKey string     `json:"memory_key"`
	Agent     string     `json:"agent"`
	UserID    string     `json:"user_id"`
	SessionID string     `json:"session_id"`
	ValidFrom time.Time  `json:"valid_from"`
	ValidTo   *time.Time `json:"valid_to,omitempty"`
	// SupersededBy is the memory that retired this one; Supersedes the memories of the
	// timeline this one retired.
	SupersededBy string   `json:"superseded_by,omitempty"`
	Supersedes   []string `json:"supersedes,omitempty"`
}

type timelineAnswer struct {
	Namespace string          `json:"namespace"`
	Entity    string          `json:"entity,omitempty"`
	MemoryKey string          `json:"memory_key,omitempty"`
	Keys      int             `json:"keys"`
	Entries   []timelineEntry `json:"entries"`
}

// timeline is memory.timeline: every version of the facts asked for, from the
// journal on the authority, in valid-time order, with what superseded what.
func (s *Service) timeline(ctx context.Context, p auth.Principal, c timelineCall) (*timelineAnswer, error) {
	if err := p.Namespace(c.namespace); err != nil {
		return nil, err
	}
	if c.key != "" && c.entity != "" {
		return nil, httperr.Validation("entity", "name a key or an entity, not both")
	}
	limit := timelineKeysDefault
	if c.limit != "" {
		n, err := strconv.Atoi(c.limit)
		if err != nil || n < 1 || n > timelineKeysMax {
			return nil, httperr.Validation("limit", fmt.Sprintf("limit must be an integer from 1 to %d", timelineKeysMax))
		}
		limit = n
	}
	ans := &timelineAnswer{Namespace: c.namespace, Entity: c.entity, MemoryKey: c.key, Entries: []timelineEntry{}}
	var ids []memrow.Identity
	if c.key != "" {
		id, other := route.Identity(p, c.namespace, c.key, route.Names{Agent: c.agent, UserID: c.userID, SessionID: c.sessionID})
		if err := id.Validate(); err != nil {
			return nil, err
		}
		if other {
			return nil, httperr.NotFound("memory not found")
		}
		ids = []memrow.Identity{id}
	} else {
		for _, f := range []struct{ name, v string }{{"agent", c.agent}, {"user_id", c.userID}, {"session_id", c.sessionID}} {
			if f.v != "" {
				if err := memrow.ValidateIdentity(f.name, f.v); err != nil {
					return nil, err
				}
			}
		}
		if len(c.entity) > 256 {
			return nil, httperr.Validation("entity", "entity has more than 256 bytes")
		}
		user := scopedUser(p, c.userID)
		if user == noUser {
			return ans, nil
		}
		found, err := heads.Naming(ctx, s.pool, heads.Scope{Org: p.Org, Namespace: c.namespace, Agent: c.agent, UserID: user, SessionID: c.sessionID},
			c.entity, limit)
		if err != nil {
			return nil, httperr.Store("reading the subject's heads", err)
		}
		for _, r := range found {
			ids = append(ids, r.Identity)
		}
	}
	journals := make([][]revisions.Version, len(ids))
	if len(ids) > 0 {
		b := &pgx.Batch{}
		for i, id := range ids {
			revisions.QueueKeyVersions(b, id, &journals[i])
		}
		if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
			return nil, httperr.Store("reading the versions", err)
		}
	}
	for i, journal := range journals {
		if len(journal) > 0 {
			ans.Keys++
		}
		ans.Entries = append(ans.Entries, timelineOf(ids[i], journal)...)
	}
	if c.key != "" && ans.Keys == 0 {
		return nil, httperr.NotFound("memory not found")
	}
	orderTimeline(ans.Entries)
	return ans, nil
}

// timelineOf places one key's versions in valid time: a version holds from its
// valid_at (else when it was written) until its valid_to, or else until the next
// version of the key began.
func timelineOf(id memrow.Identity, journal []revisions.Version) []timelineEntry {
	out := make([]timelineEntry, len(journal))
	for i, v := range journal {
		r := v.Row
		from := r.UpdatedAt
		if r.ValidAt != nil {
			from = *r.ValidAt
		}
		out[i] = timelineEntry{versionView: versionOf(v), Cite: memoryCite(r.MemoryID, r.Version), MemoryKey: id.MemoryKey, Agent: id.Agent,
			UserID: id.UserID, SessionID: id.SessionID, ValidFrom: from.UTC(), ValidTo: utcPtr(r.ValidTo), SupersededBy: r.SupersededBy}
	}
	for i := range out {
		if out[i].ValidTo == nil && i+1 < len(out) {
			next := out[i+1].ValidFrom
			out[i].ValidTo = &next
		}
	}
	return out
}

// orderTimeline sorts entries by valid time (then key and version, so the order is
// total) and links what superseded what among them.
func orderTimeline(entries []timelineEntry) {
	slices.SortStableFunc(entries, func(a, b timelineEntry) int {
		if c := a.ValidFrom.Compare(b.ValidFrom); c != 0 {
			return c
		}
		if c := strings.Compare(a.MemoryKey, b.MemoryKey); c != 0 {
			return c
		}
		return int(a.Version - b.Version)
	})
	byID := map[string]int{}
	for i, e := range entries {
		byID[e.MemoryID] = i // the newest version of each memory
	}
	for _, e := range entries {
		if j, ok := byID[e.SupersededBy]; ok && e.SupersededBy != "" && !slices.Contains(entries[j].Supersedes, e.MemoryID) {
			entries[j].Supersedes = append(entries[j].Supersedes, e.MemoryID)
		}
	}
}
