package query

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// aggregateScanMax bounds the heads one memory.aggregate counts; a scope holding more
// answers truncated.
const aggregateScanMax = 100_000

const (
	aggregateLimitDefault = 50
	aggregateLimitMax     = 1000
)

// aggregateDims are the dimensions memory.aggregate counts by, in the answer's order.
var aggregateDims = []string{heads.ByType, heads.ByStatus, heads.ByTag, heads.ByEntity, heads.ByDay}

// aggregateCall is GET /v1/namespaces/{ns}/memories:aggregate's query string.
type aggregateCall struct {
	namespace, by, agent, userID, sessionID, limit string
}

// bucket is one value of a dimension and how many heads hold it.
type bucket struct {
	Value string `json:"value"`
	Count int64  `json:"count"`
}

// aggregateAnswer counts the scope's live heads by each dimension asked: types,
// statuses, tags and entities most held first (then by value), days (UTC, of
// creation) in calendar order; each at most limit values (the latest days).
type aggregateAnswer struct {
	Namespace string              `json:"namespace"`
	Total     int64               `json:"total"`
	Truncated bool                `json:"truncated"`
	By        map[string][]bucket `json:"by"`
}

// aggregate is memory.aggregate over the Postgres heads, current at the commit.
func (s *Service) aggregate(ctx context.Context, p auth.Principal, c aggregateCall) (*aggregateAnswer, error) {
	if err := p.Namespace(c.namespace); err != nil {
		return nil, err
	}
	dims := aggregateDims
	if c.by != "" {
		dims = nil
		for _, d := range strings.Split(c.by, ",") {
			if !slices.Contains(aggregateDims, d) {
				return nil, httperr.Validation("by", fmt.Sprintf("unknown dimension %q; by takes %s", d, strings.Join(aggregateDims, ", ")))
			}
			if !slices.Contains(dims, d) {
				dims = append(dims, d)
			}
		}
	}
	limit := aggregateLimitDefault
	if c.limit != "" {
		n, err := strconv.Atoi(c.limit)
		if err != nil || n < 1 || n > aggregateLimitMax {
			return nil, httperr.Validation("limit", fmt.Sprintf("limit must be an integer from 1 to %d", aggregateLimitMax))
		}
		limit = n
	}
	for _, f := range []struct{ name, v string }{{"agent", c.agent}, {"user_id", c.userID}, {"session_id", c.sessionID}} {
		if f.v != "" {
			if err := memrow.ValidateIdentity(f.name, f.v); err != nil {
				return nil, err
			}
		}
	}
	ans := &aggregateAnswer{Namespace: c.namespace, By: map[string][]bucket{}}
	for _, d := range dims {
		ans.By[d] = []bucket{}
	}
	user := scopedUser(p, c.userID)
	if user == noUser {
		return ans, nil
	}
	counts, total, err := heads.Aggregate(ctx, s.pool, heads.Scope{Org: p.Org, Namespace: c.namespace, Agent: c.agent, UserID: user, SessionID: c.sessionID},
		dims, aggregateScanMax)
	if err != nil {
		return nil, httperr.Store("counting the heads", err)
	}
	ans.Total, ans.Truncated = total, total >= aggregateScanMax
	for _, d := range dims {
		ans.By[d] = buckets(counts[d], d == heads.ByDay, limit)
	}
	return ans, nil
}

// buckets orders a dimension's counts (days by date, the rest most held first) and
// keeps limit of them.
func buckets(counts map[string]int64, byDate bool, limit int) []bucket {
	out := make([]bucket, 0, len(counts))
	for v, n := range counts {
		out = append(out, bucket{Value: v, Count: n})
	}
	slices.SortFunc(out, func(a, b bucket) int {
		if !byDate && a.Count != b.Count {
			return int(b.Count - a.Count)
		}
		return strings.Compare(a.Value, b.Value)
	})
	if len(out) > limit {
		if byDate { // the latest days
			return out[len(out)-limit:]
		}
		out = out[:limit]
	}
	return out
}
