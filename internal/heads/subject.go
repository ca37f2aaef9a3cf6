package heads

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/memrow"
)

// The reads of a subject's heads the background work and memory.set_from_messages
// make: a key in the other sessions of its user, the tags a namespace uses, the heads
// of one user that a filter selects.

// InOtherSessions reads the heads of id's key held by other sessions of its user.
func InOtherSessions(ctx context.Context, q Querier, id memrow.Identity) ([]*memrow.Row, error) {
	rows, err := q.Query(ctx, `SELECT `+Row+` FROM loom.memory_current
		WHERE org = $1 AND namespace = $2 AND memory_key = (SELECT loom.key_ref($1, $3)) AND user_id = (SELECT loom.user_ref($1, $4))
		  AND session_id <> (SELECT loom.session_ref($1, $5))`,
		id.Org, id.Namespace, id.MemoryKey, id.UserID, id.SessionID)
	if err != nil {
		return nil, err
	}
	return Collect(rows)
}

// Tags reads the tags a namespace's heads use, most used first, over a sample of
// sample live heads, at most limit. A head stored with no tags list (a JSON null,
// written before migration 058 repaired them) counts as none.
func Tags(ctx context.Context, q Querier, org, namespace string, sample, limit int) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT t FROM (SELECT `+Row+` AS row FROM loom.memory_current WHERE org = $1 AND namespace = $2
			AND NOT (row ->> 'tombstone')::boolean LIMIT $4) h,
			jsonb_array_elements_text(CASE jsonb_typeof(h.row -> 'tags') WHEN 'array' THEN h.row -> 'tags' ELSE '[]' END) t
		GROUP BY t ORDER BY count(*) DESC, t LIMIT $3`, org, namespace, limit, sample)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// OfUser reads at most limit heads of a namespace that where selects, of user ("":
// any user's). where is a condition over loom.memory_current's columns whose own
// arguments (args) are numbered from $3.
func OfUser(ctx context.Context, q Querier, org, namespace, user string, limit int, where string, args ...any) ([]*memrow.Row, error) {
	n := len(args) + 3
	all := append([]any{org, namespace}, args...)
	all = append(all, user)
	rows, err := q.Query(ctx, fmt.Sprintf(`SELECT `+Row+` FROM loom.memory_current WHERE org = $1 AND namespace = $2 AND %s
		AND ($%d = '' OR user_id = (SELECT loom.user_ref($1, $%d))) LIMIT %d`, where, n, n, limit), all...)
	if err != nil {
		return nil, err
	}
	return Collect(rows)
}

// QueueNamespacesOfUser queues on b the read of the namespaces of org where user holds
// a head, into into: the heads' part of the namespaces an erasure of the user fences.
func QueueNamespacesOfUser(b *pgx.Batch, org, user string, into *[]string) {
	queueStrings(b, into, `SELECT DISTINCT namespace FROM loom.memory_current WHERE org = $1 AND user_id = ANY((SELECT loom.user_refs($1, $2))::text[])`, org, user)
}

func queueStrings(b *pgx.Batch, into *[]string, query string, args ...any) {
	b.Queue(query, args...).Query(func(rows pgx.Rows) error {
		var err error
		*into, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
}

// UsersOf reads the users (other than the anonymous "-") that hold a live head in a
// namespace, at most limit, in order: the users a namespace's new profile schema
// builds a profile for.
func UsersOf(ctx context.Context, q Querier, org, namespace string, limit int) ([]string, error) {
	// The column holds each user's reference (migration 155): the distinct ones first,
	// then each named once.
	rows, err := q.Query(ctx, `SELECT loom.user_name($1, u) AS name FROM (SELECT DISTINCT user_id AS u FROM loom.memory_current
		WHERE org = $1 AND namespace = $2 AND user_id <> '-' AND NOT (row->>'tombstone')::boolean) x ORDER BY name LIMIT $3`,
		org, namespace, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
