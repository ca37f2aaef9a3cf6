package query

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
)

// namespaceCountCap is the most live memories namespace.list counts in a namespace:
// a count walks the namespace's heads, so it stops there (memories_more says it did).
const namespaceCountCap = 1000

// namespacesAnswer is what namespace.list answers.
type namespacesAnswer struct {
	Namespaces    []namespaceView `json:"namespaces"`
	NextPageToken string          `json:"next_page_token,omitempty"`
}

// namespaceView is one namespace of the list.
type namespaceView struct {
	Namespace string `json:"namespace"`
	// Memories is how many live memories a default memory.list of the token serves,
	// up to namespaceCountCap; MemoriesMore: the namespace holds more.
	Memories     int            `json:"memories"`
	MemoriesMore bool           `json:"memories_more,omitempty"`
	Policy       *policySummary `json:"policy,omitempty"`
}

// policySummary is what namespace.list shows of a configured namespace's policy;
// namespace.get answers the whole of it.
type policySummary struct {
	ConflictPolicy string    `json:"conflict_policy"`
	Visibility     string    `json:"visibility"`
	RetentionDays  int       `json:"retention_days,omitempty"`
	UpdatedAt      time.Time `json:"updated_at"`
	// deleted: namespace.delete soft-deleted the namespace; the list leaves it out.
	deleted bool
}

// namespaceList is namespace.list's query string, as the request sent it.
type namespaceList struct{ limit, pageToken string }

// listNamespaces is namespace.list: the org's namespaces the token reaches, by name,
// paged as memory.list is. A namespace is the org's once a revision was committed in
// it (it has a generation) or its policy was set. A token bound to one user lists only
// the namespaces holding its own live rows, and counts those alone: a namespace's name
// can name another user ("notes-bob"), and the binding bounds what the token learns
// (no index leads with user_id, so its count walks the namespace's heads to the end;
// an unbound token's stops at the cap). A bound token's page may so hold fewer than
// limit namespaces while a next_page_token follows. A namespace namespace.delete
// soft-deleted is left out (as a bound token's empty ones are: a page may hold fewer)
// until a PUT registers it again. It reads Postgres only, so a write that answered is
// counted.
func (s *Service) listNamespaces(ctx context.Context, p auth.Principal, r namespaceList) (*namespacesAnswer, error) {
	limit := listLimitDefault
	if r.limit != "" {
		n, err := strconv.Atoi(r.limit)
		if err != nil || n < 1 || n > listLimitMax {
			return nil, httperr.Validation("limit", fmt.Sprintf("limit must be between 1 and %d", listLimitMax))
		}
		limit = n
	}
	cur, err := parseCursor(r.pageToken, "name")
	if err != nil {
		return nil, err
	}
	only := p.Namespaces
	if only != nil && len(only) == 0 {
		return &namespacesAnswer{Namespaces: []namespaceView{}}, nil
	}
	written, err := generations.Names(ctx, s.pool, p.Org, cur.Key, only, limit+1)
	if err != nil {
		return nil, httperr.Store("listing the namespaces", err)
	}
	policies, err := s.configuredNamespaces(ctx, p.Org, cur.Key, only, limit+1)
	if err != nil {
		return nil, httperr.Store("listing the namespaces' policies", err)
	}
	names := append(written, policyNames(policies)...)
	slices.Sort(names)
	names = slices.Compact(names)
	ans := &namespacesAnswer{Namespaces: []namespaceView{}}
	if len(names) > limit {
		names = names[:limit]
		ans.NextPageToken = listCursor{Order: "name", Key: names[limit-1]}.token()
	}
	if len(names) == 0 {
		return ans, nil
	}
	counts, err := heads.CountLive(ctx, s.pool, p.Org, names, p.ReadUserID, namespaceCountCap+1)
	if err != nil {
		return nil, httperr.Store("counting the namespaces' memories", err)
	}
	for _, ns := range names {
		v := namespaceView{Namespace: ns, Memories: counts[ns], Policy: policies[ns]}
		if (p.ReadUserID != "" && v.Memories == 0) || (v.Policy != nil && v.Policy.deleted) {
			continue
		}
		if v.Memories > namespaceCountCap {
			v.Memories, v.MemoriesMore = namespaceCountCap, true
		}
		ans.Namespaces = append(ans.Namespaces, v)
	}
	return ans, nil
}

// configuredNamespaces reads up to n of org's namespaces with a policy after the name
// after (narrowed to only when it is not nil), with their policy's summary.
func (s *Service) configuredNamespaces(ctx context.Context, org, after string, only []string, n int) (map[string]*policySummary, error) {
	rows, err := s.pool.Query(ctx, `SELECT namespace, config, updated_at, deleted_at IS NOT NULL FROM loom.namespaces
		WHERE org = $1 AND namespace > $2 AND ($3::text[] IS NULL OR namespace = ANY($3))
		ORDER BY namespace LIMIT $4`, org, after, only, n)
	if err != nil {
		return nil, err
	}
	out := map[string]*policySummary{}
	var ns string
	var raw []byte
	var at time.Time
	var deleted bool
	_, err = pgx.ForEachRow(rows, []any{&ns, &raw, &at, &deleted}, func() error {
		var cfg struct {
			ConflictPolicy string `json:"conflict_policy"`
			Visibility     string `json:"visibility"`
			RetentionDays  int    `json:"retention_days"`
		}
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return fmt.Errorf("the policy of %s: %w", ns, err)
		}
		if cfg.Visibility == "" {
			cfg.Visibility = "private"
		}
		out[ns] = &policySummary{ConflictPolicy: cfg.ConflictPolicy, Visibility: cfg.Visibility, RetentionDays: cfg.RetentionDays, UpdatedAt: at, deleted: deleted}
		return nil
	})
	return out, err
}

func policyNames(policies map[string]*policySummary) []string {
	out := make([]string, 0, len(policies))
	for ns := range policies {
		out = append(out, ns)
	}
	return out
}

// refuseDeleted answers 404 for a namespace namespace.delete soft-deleted: it is not
// read until a PUT registers it again. One primary-key read of loom.namespaces.
func (s *Service) refuseDeleted(ctx context.Context, org string, namespaces ...string) error {
	var deleted []string
	err := s.pool.QueryRow(ctx, `SELECT coalesce(array_agg(namespace ORDER BY namespace), '{}') FROM loom.namespaces
		WHERE org = $1 AND namespace = ANY($2) AND deleted_at IS NOT NULL`, org, namespaces).Scan(&deleted)
	if err != nil {
		return httperr.Store("reading whether the namespace was deleted", err)
	}
	if len(deleted) > 0 {
		return deletedNamespace(deleted[0])
	}
	return nil
}

func deletedNamespace(ns string) *httperr.Error {
	return httperr.NotFound("namespace " + ns + " was deleted; PUT /v1/namespaces/" + ns + " registers it again")
}
