package heads

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/memrow"
)

// CategoryCount is one category of a namespace and the live heads that hold it.
type CategoryCount struct {
	Category string `json:"category"`
	Memories int64  `json:"memories"`
}

// Categories is a namespace's taxonomy: each tag its live heads hold, most held first,
// and how many live heads hold none (a head stored with no tags list, a JSON null
// written before migration 058, counts as untagged).
type Categories struct {
	Categories []CategoryCount `json:"categories"`
	Untagged   int64           `json:"untagged"`
	Sampled    int64           `json:"sampled"`
}

// CountCategories counts the categories of at most sample live heads of a namespace:
// userID's and the shared scope's alone unless userID is empty. A tag is in the sealed
// text, so each head is opened.
func CountCategories(ctx context.Context, q Querier, org, namespace, userID string, sample int) (*Categories, error) {
	rows, err := q.Query(ctx, `WITH h AS (SELECT `+RowOf("c")+` AS row FROM loom.memory_current c
			WHERE c.org = $1 AND c.namespace = $2 AND ($3 = '' OR c.user_id = (SELECT loom.user_ref($1, $3)) OR c.user_id = (SELECT loom.user_ref($1, $4))) AND `+liveHead+` LIMIT $5),
		t AS (SELECT CASE jsonb_typeof(h.row -> 'tags') WHEN 'array' THEN h.row -> 'tags' ELSE '[]' END AS tags FROM h)
		SELECT tag, count(*) FROM t, jsonb_array_elements_text(t.tags) tag GROUP BY tag
		UNION ALL SELECT NULL, count(*) FILTER (WHERE jsonb_array_length(t.tags) = 0) FROM t
		UNION ALL SELECT '', count(*) FROM t`, org, namespace, userID, memrow.SharedUser, sample)
	if err != nil {
		return nil, fmt.Errorf("count the namespace's categories: %w", err)
	}
	out := &Categories{Categories: []CategoryCount{}}
	var tag *string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&tag, &n}, func() error {
		switch {
		case tag == nil:
			out.Untagged = n
		case *tag == "":
			out.Sampled = n
		default:
			out.Categories = append(out.Categories, CategoryCount{Category: *tag, Memories: n})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count the namespace's categories: %w", err)
	}
	slices.SortFunc(out.Categories, func(a, b CategoryCount) int {
		if c := cmp.Compare(b.Memories, a.Memories); c != 0 {
			return c
		}
		return strings.Compare(a.Category, b.Category)
	})
	return out, nil
}
