package heads

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/memrow"
)

// The reads below serve one caller each beyond the lookups in heads.go: the write
// side's rounds and commit, its sweeps and memory.clear, memory.import and the Undo of
// a retirement, and the query side's snapshot. Every one opens a sealed row as the
// lookups do: by selecting Row, or, for the write side's rounds, as stored (Sealed),
// opened in Go.

// QueueWithKeys queues WithKeysSQL on b, each row opened in Go under ring (as
// QueueManyOpened); into holds the heads once the batch is sent and unnamed.Name has
// named the users of those whose text does not.
func QueueWithKeys(b *pgx.Batch, ring *kek.Ring, unnamed *Unnamed, into *[]*memrow.Row, org, namespace string, keys []string) {
	queueOpened(b, ring, unnamed, into, org, WithKeysSQL, org, namespace, keys)
}

// QueueWithKeyRefs queues WithKeyRefsSQL on b, as QueueWithKeys: keyRefs are the keys'
// references under org's key (events.KeyRef).
func QueueWithKeyRefs(b *pgx.Batch, ring *kek.Ring, unnamed *Unnamed, into *[]*memrow.Row, org, namespace string, keyRefs []string) {
	queueOpened(b, ring, unnamed, into, org, WithKeyRefsSQL, org, namespace, keyRefs)
}

// QueueWithContent queues WithContentSQL on b, as QueueWithKeys.
func QueueWithContent(b *pgx.Batch, ring *kek.Ring, unnamed *Unnamed, into *[]*memrow.Row, org, namespace string, users, shas []string) {
	queueOpened(b, ring, unnamed, into, org, WithContentSQL, org, namespace, users, shas)
}

func queueOpened(b *pgx.Batch, ring *kek.Ring, unnamed *Unnamed, into *[]*memrow.Row, org, query string, args ...any) {
	b.Queue(query, args...).Query(func(rows pgx.Rows) error {
		return eachOpened(rows, ring, unnamed, org, func(r *memrow.Row) { *into = append(*into, r) })
	})
}

// QueueLock queues a lock of one key's head on b (in a transaction) and a read of its
// version and seq into version and seq (0 when the key has none).
func QueueLock(b *pgx.Batch, id memrow.Identity, version, seq *int64) {
	b.Queue(WithWriterRefs+`SELECT coalesce(max(version), 0), coalesce(max(seq), 0) FROM (SELECT version, seq FROM loom.memory_current
			WHERE org = $1 AND namespace = $2 AND `+IdentityIs+`
			FOR UPDATE) h`, id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey).
		QueryRow(func(r pgx.Row) error { return r.Scan(version, seq) })
}

// Page reads up to n heads of a namespace after the identity after, in key order;
// liveOnly leaves out deleted heads.
func Page(ctx context.Context, q Querier, org, namespace string, after memrow.Identity, n int, liveOnly bool) ([]*memrow.Row, error) {
	rows, err := q.Query(ctx, fmt.Sprintf(WithWriterRefs+`SELECT `+Row+` FROM loom.memory_current
		WHERE org = $1 AND namespace = $2
		  AND (agent, user_id, session_id, memory_key) > ((SELECT w.r[2] FROM w), (SELECT loom.user_ref($1, $4)), (SELECT w.r[3] FROM w), (SELECT w.r[1] FROM w))
		  AND (NOT $7 OR NOT (row->>'tombstone')::boolean)
		ORDER BY agent, user_id, session_id, memory_key LIMIT %d`, n),
		org, namespace, after.Agent, after.UserID, after.SessionID, after.MemoryKey, liveOnly)
	if err != nil {
		return nil, err
	}
	return Collect(rows)
}

// Expired reads up to limit heads whose expiry has passed and that are not deleted,
// soonest expired first; an empty org, namespace or userID does not narrow.
func Expired(ctx context.Context, q Querier, org, namespace, userID string, limit int) ([]*memrow.Row, error) {
	rows, err := q.Query(ctx, `SELECT `+Row+` FROM loom.memory_current
		WHERE expires_at <= now() AND NOT (row->>'tombstone')::boolean
		  AND ($1 = '' OR org = $1) AND ($2 = '' OR namespace = $2) AND ($3 = '' OR user_id = loom.user_ref(org, $3))
		ORDER BY expires_at LIMIT $4`, org, namespace, userID, limit)
	if err != nil {
		return nil, err
	}
	return Collect(rows)
}

// Scope is a namespace's heads narrowed by identity: an empty field does not narrow.
type Scope struct {
	Org, Namespace, Agent, UserID, SessionID string
}

// scopeSQL is Scope's predicate over the heads that are not deleted. The agent and
// session columns hold references (migration 173), bound once a statement.
const scopeSQL = `org = $1 AND namespace = $2 AND ($3 = '' OR agent = (SELECT loom.agent_ref($1, $3)))
	AND ($4 = '' OR user_id = (SELECT loom.user_ref($1, $4)))
	AND ($5 = '' OR session_id = (SELECT loom.session_ref($1, $5))) AND NOT (row->>'tombstone')::boolean`

// Unlocked reads up to n of the scope's live heads that are not locked, in key order.
func Unlocked(ctx context.Context, q Querier, sc Scope, n int) ([]*memrow.Row, error) {
	rows, err := q.Query(ctx, fmt.Sprintf(`SELECT `+Row+` FROM loom.memory_current WHERE %s AND NOT (row->>'locked')::boolean
		ORDER BY agent, user_id, session_id, memory_key LIMIT %d`, scopeSQL, n), sc.Org, sc.Namespace, sc.Agent, sc.UserID, sc.SessionID)
	if err != nil {
		return nil, err
	}
	return Collect(rows)
}

// CountLocked counts the scope's live heads that are locked.
func CountLocked(ctx context.Context, q Querier, sc Scope) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM loom.memory_current WHERE %s AND (row->>'locked')::boolean`, scopeSQL),
		sc.Org, sc.Namespace, sc.Agent, sc.UserID, sc.SessionID).Scan(&n)
	return n, err
}

// OfSubject reads the heads of a namespace under any of keys held by one agent and
// user, in any session.
func OfSubject(ctx context.Context, q Querier, org, namespace, agent, userID string, keys []string) ([]*memrow.Row, error) {
	rows, err := q.Query(ctx, `SELECT `+Row+` FROM loom.memory_current WHERE org = $1 AND namespace = $2 AND agent = (SELECT loom.agent_ref($1, $3))
		AND user_id = (SELECT loom.user_ref($1, $4)) AND memory_key = ANY((SELECT loom.key_refs($1, $5::text[]))::text[])`, org, namespace, agent, userID, keys)
	if err != nil {
		return nil, err
	}
	return Collect(rows)
}

// ContentSHA256 is the content hash (plain, as the row holds it opened) of a head of
// the namespace holding memoryID, "" when none does.
func ContentSHA256(ctx context.Context, q Querier, org, namespace, memoryID string) (string, error) {
	var sha string
	err := q.QueryRow(ctx, `SELECT coalesce(`+Row+`->>'content_sha256', '') FROM loom.memory_current WHERE org = $1 AND namespace = $2 AND memory_id = $3`,
		org, namespace, memoryID).Scan(&sha)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return sha, err
}

// EachLive hands each head of a namespace that is not deleted to fn, in identity
// order, as it streams them; fn's error stops the read and is returned as it is.
func EachLive(ctx context.Context, q Querier, org, namespace string, fn func(*memrow.Row) error) error {
	rows, err := q.Query(ctx, `SELECT `+Row+` FROM loom.memory_current WHERE org = $1 AND namespace = $2
		AND NOT (row->>'tombstone')::boolean ORDER BY agent, user_id, session_id, memory_key`, org, namespace)
	if err != nil {
		return fmt.Errorf("read the heads: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			return fmt.Errorf("read the heads: %w", err)
		}
		row, err := Decode(raw)
		if err != nil {
			return err
		}
		if err := fn(row); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the heads: %w", err)
	}
	return nil
}

// countLiveSQL counts, per namespace of $2, the heads a default memory.list serves
// (not deleted, not past expires_at or valid_to, not of high sensitivity, active or
// conflicted), of user $3 alone unless it is empty, stopping at $4 rows: each
// namespace's count is a walk of its heads, and the cap bounds it.
const countLiveSQL = `SELECT n.namespace, (SELECT count(*) FROM (SELECT 1 FROM loom.memory_current c
		WHERE c.org = $1 AND c.namespace = n.namespace AND ($3 = '' OR c.user_id = (SELECT loom.user_ref($1, $3)))
		  AND NOT (c.row->>'tombstone')::boolean AND c.row->>'status' IN ('active', 'conflicted')
		  AND c.row->>'sensitivity' IS DISTINCT FROM 'high'
		  AND (c.expires_at IS NULL OR c.expires_at > now())
		  AND (c.row->>'valid_to' IS NULL OR (c.row->>'valid_to')::timestamptz > now())
		LIMIT $4) live)
	FROM unnest($2::text[]) AS n(namespace)`

// CountLive counts the live heads of each of org's namespaces (of userID's rows
// alone unless it is empty), up to most: a namespace holding more reads most.
func CountLive(ctx context.Context, q Querier, org string, namespaces []string, userID string, most int) (map[string]int, error) {
	rows, err := q.Query(ctx, countLiveSQL, org, namespaces, userID, most)
	if err != nil {
		return nil, fmt.Errorf("count the live heads: %w", err)
	}
	out := map[string]int{}
	var ns string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&ns, &n}, func() error { out[ns] = n; return nil })
	if err != nil {
		return nil, fmt.Errorf("count the live heads: %w", err)
	}
	return out, nil
}
