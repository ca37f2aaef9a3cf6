// Package heads reads memory heads from loom.memory_current, the authority's current
// row of every key. The write side reads a head to build over it; the read side serves
// heads and checks search hits against them.
package heads

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	json "github.com/segmentio/encoding/json"

	"github.com/loomplane/loom/internal/memrow"
)

// Querier is a pool, a connection or a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Read returns the head of one key, or nil when the key has none. It finds the head
// under any live generation of the org's user reference key (loom.identity_refs,
// migration 182): while a rotation runs, a head named under the retired key is still
// the key's.
func Read(ctx context.Context, q Querier, id memrow.Identity) (*memrow.Row, error) {
	var raw []byte
	err := q.QueryRow(ctx, readSQL, id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return Decode(raw)
}

// readSQL is Many's lookup of one identity ($3 agent, $4 user, $5 session, $6 key).
const readSQL = `SELECT m.row FROM loom.identity_refs($1, ARRAY[$3::text], ARRAY[$4::text], ARRAY[$5::text], ARRAY[$6::text]) AS k
	CROSS JOIN LATERAL (SELECT ` + openedC + ` AS row FROM loom.memory_current c WHERE ` + identityOfK + ` OFFSET 0) m LIMIT 1`

// Lock reads the head of one key under its row lock, in tx; nil when the key has none.
func Lock(ctx context.Context, tx pgx.Tx, id memrow.Identity) (*memrow.Row, error) {
	return read(ctx, tx, id, " FOR UPDATE")
}

// Row is what a read selects of loom.memory_current or loom.memory_revisions in place
// of their row column: the row with its text opened under the revision's data key
// (migration 056). A row whose key was destroyed (erased, redacted) has no text.
const Row = "loom.opened_row(row, sealed, org, namespace, seq, user_id)"

// WithWriterRefs binds the references of one identity's key, agent and session for a
// statement over its rows (migrations 171, 173: the columns hold them), the identity's
// parameters numbered as every such statement numbers them: $1 org, $3 agent, $5
// session, $6 key. loom.writer_refs computes the three with the org's key unwrapped
// once; materialized, so the CTE runs once a statement and IdentityIs reads each as an
// init plan (a parameter an index scan binds).
const WithWriterRefs = `WITH w AS MATERIALIZED (SELECT loom.writer_refs($1, $6, $3, $5) AS r) `

// IdentityIs is the predicate of WithWriterRefs' identity over a memory row's
// columns ($4 the user).
const IdentityIs = `agent = (SELECT w.r[2] FROM w) AND user_id = (SELECT loom.user_ref($1, $4)) AND session_id = (SELECT w.r[3] FROM w)
	AND memory_key = (SELECT w.r[1] FROM w)`

// RowOf is Row of the table aliased alias.
func RowOf(alias string) string {
	return fmt.Sprintf("loom.opened_row(%[1]s.row, %[1]s.sealed, %[1]s.org, %[1]s.namespace, %[1]s.seq, %[1]s.user_id)", alias)
}

func read(ctx context.Context, q Querier, id memrow.Identity, lock string) (*memrow.Row, error) {
	var raw []byte
	err := q.QueryRow(ctx, WithWriterRefs+`SELECT `+Row+` FROM loom.memory_current
		WHERE org = $1 AND namespace = $2 AND `+IdentityIs+lock,
		id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return Decode(raw)
}

// Collect reads a result whose one column is a stored head row (SELECT row FROM
// loom.memory_current …) and decodes each; it closes rows.
func Collect(rows pgx.Rows) ([]*memrow.Row, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*memrow.Row, error) {
		var raw []byte
		if err := r.Scan(&raw); err != nil {
			return nil, err
		}
		return Decode(raw)
	})
}

// The lookups below probe an index once per key, whatever the statistics say. A plan
// made while a namespace's statistics are small (a new deployment, a namespace that
// grew since the last ANALYZE, a cached generic plan) costs every index on
// (org, namespace, …) alike and may take one that binds only that prefix, filtering
// the namespace's every head for each key: measured in the set bench at 3-5 ms a call
// at a few hundred heads, most of Postgres's CPU per memory.set, and linear in the
// namespace. So each key is an equality in a lateral subquery, which binds it to an
// index column (an `= ANY($n)` may be planned as a filter instead), and OFFSET 0 keeps
// the subquery from being flattened into a join that hashes the whole namespace
// (measured: 47 ms at 10k heads for 10 identities); a LIMIT 1 also prevented that, but
// its cheap-first-row costing chose the prefix-only scan. The indexes that lead with
// a column these lookups do not name are partial (migration 053), so they are not
// candidates at all.
// openedC is Row of the lookups' table, aliased c.
const openedC = "loom.opened_row(c.row, c.sealed, c.org, c.namespace, c.seq, c.user_id)"

const (
	manySQL = `SELECT m.row FROM ` + identitiesRefs + `
	CROSS JOIN LATERAL (SELECT ` + openedC + ` AS row FROM loom.memory_current c WHERE ` + identityOfK + ` OFFSET 0) m`

	// identitiesRefs are the identities $3 agents, $4 users, $5 sessions, $6 keys of
	// org $1 (k), clear and by their references: loom.identity_refs, the org's key
	// unwrapped once for all of them.
	identitiesRefs = `loom.identity_refs($1, $3::text[], $4::text[], $5::text[], $6::text[]) AS k`

	// identityOfK is the predicate of the head (aliased c) of identitiesRefs' k in
	// namespace $2.
	identityOfK = `c.org = $1 AND c.namespace = $2 AND c.agent = k.agent_ref AND c.user_id = k.user_ref
		  AND c.session_id = k.session_ref AND c.memory_key = k.key_ref`

	withIDsSQL = `SELECT m.row FROM unnest($3::uuid[]) AS k(memory_id)
	CROSS JOIN LATERAL (SELECT ` + openedC + ` AS row FROM loom.memory_current c
		WHERE c.org = $1 AND c.namespace = $2 AND c.memory_id = k.memory_id OFFSET 0) m`
)

var (
	// WithKeysSQL reads the heads of a namespace ($1, $2) under any of the keys $3,
	// whatever their agent, user and session, as stored (Sealed).
	WithKeysSQL = `SELECT m.* FROM unnest((SELECT loom.key_refs($1, $3::text[]))) AS k(memory_key)` + headsOfKeys

	// WithKeyRefsSQL is WithKeysSQL for keys $3 given by their references (loom.key_ref's
	// values, events.KeyRef in Go): a writer that holds the org's key binds them, and
	// Postgres unwraps no key for the read.
	WithKeyRefsSQL = `SELECT m.* FROM unnest($3::text[]) AS k(memory_key)` + headsOfKeys

	// headsOfKeys joins the heads of a namespace ($1, $2) under each key reference of k.
	headsOfKeys = `
	CROSS JOIN LATERAL (SELECT ` + Sealed("c") + ` FROM loom.memory_current c
		WHERE c.org = $1 AND c.namespace = $2 AND c.memory_key = k.memory_key OFFSET 0) m`

	// WithContentSQL reads the heads of a namespace ($1, $2) of the users $3 holding
	// any of the values whose plain content hashes are $4, as stored (Sealed). A head
	// stores its hash keyed under its scope's key (migration 101), so the lookup
	// hashes each value under each user's; a head written before and not yet rehashed
	// by the at-rest pass matches the plain hash.
	WithContentSQL = `SELECT m.* FROM (SELECT s.sha AS content_sha256 FROM unnest($4::text[]) AS s(sha)
		UNION SELECT loom.content_hash($1, $2, loom.user_ref($1, u.user_id), s.sha) FROM unnest($3::text[]) AS u(user_id), unnest($4::text[]) AS s(sha)) k
	CROSS JOIN LATERAL (SELECT ` + Sealed("c") + ` FROM loom.memory_current c
		WHERE c.org = $1 AND c.namespace = $2 AND c.content_sha256 = k.content_sha256 OFFSET 0) m`
)

// Many returns the heads of several keys of one namespace in one query, by
// IdentityKey; keys with no head are absent.
func Many(ctx context.Context, q Querier, org, namespace string, ids []memrow.Identity) (map[string]*memrow.Row, error) {
	rows, err := q.Query(ctx, manySQL, manyArgs(org, namespace, ids)...)
	if err != nil {
		return nil, fmt.Errorf("read heads: %w", err)
	}
	out := map[string]*memrow.Row{}
	if err := collectByKey(rows, out); err != nil {
		return nil, fmt.Errorf("read heads: %w", err)
	}
	return out, nil
}

// QueueMany queues Many's read on b; into holds the heads, by IdentityKey, once the
// batch is sent.
func QueueMany(b *pgx.Batch, into map[string]*memrow.Row, org, namespace string, ids []memrow.Identity) {
	b.Queue(manySQL, manyArgs(org, namespace, ids)...).Query(func(rows pgx.Rows) error {
		if err := collectByKey(rows, into); err != nil {
			return fmt.Errorf("read heads: %w", err)
		}
		return nil
	})
}

func manyArgs(org, namespace string, ids []memrow.Identity) []any {
	agents := make([]string, len(ids))
	users := make([]string, len(ids))
	sessions := make([]string, len(ids))
	keys := make([]string, len(ids))
	for i, id := range ids {
		agents[i], users[i], sessions[i], keys[i] = id.Agent, id.UserID, id.SessionID, id.MemoryKey
	}
	return []any{org, namespace, agents, users, sessions, keys}
}

func collectByKey(rows pgx.Rows, into map[string]*memrow.Row) error {
	found, err := Collect(rows)
	if err != nil {
		return err
	}
	for _, r := range found {
		into[IdentityKey(r.Identity)] = r
	}
	return nil
}

// IdentityKey is a map key for a key's identity within a namespace.
func IdentityKey(id memrow.Identity) string {
	return id.Agent + "\x00" + id.UserID + "\x00" + id.SessionID + "\x00" + id.MemoryKey
}

// Decode parses a stored head row. segmentio/encoding/json decodes the same JSON into
// the same values as encoding/json at about four times its speed (3.1 against 12.8 µs
// a row, measured); every memory.set decodes its peers' heads and every search its
// hits', and encoding/json was the largest share of a write's CPU in loomd.
func Decode(raw []byte) (*memrow.Row, error) {
	var row memrow.Row
	if err := json.Unmarshal(raw, &row); err != nil {
		return nil, fmt.Errorf("decode head row: %w", err)
	}
	return &row, nil
}

// KeyRevisions reads the revisions of one key from loom.memory_revisions, oldest
// first, each row opened (Row): a revision whose key was destroyed (redacted) has no
// text.
func KeyRevisions(ctx context.Context, q Querier, id memrow.Identity) ([]*memrow.Row, error) {
	rows, err := q.Query(ctx, WithWriterRefs+`SELECT `+Row+` FROM loom.memory_revisions
		WHERE org = $1 AND namespace = $2 AND `+IdentityIs+`
		ORDER BY version`, id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey)
	if err != nil {
		return nil, err
	}
	return Collect(rows)
}

// WithID reads every head of an org that holds memoryID. An id is not unique within
// an org: a namespace restored from another's snapshot keeps the ids.
func WithID(ctx context.Context, q Querier, org, memoryID string) ([]*memrow.Row, error) {
	rows, err := q.Query(ctx, `SELECT `+Row+` FROM loom.memory_current WHERE org = $1 AND memory_id = $2`, org, memoryID)
	if err != nil {
		return nil, err
	}
	return Collect(rows)
}

// InNamespaceWithIDs reads the heads of one namespace that hold any of memoryIDs.
func InNamespaceWithIDs(ctx context.Context, q Querier, org, namespace string, memoryIDs []string) ([]*memrow.Row, error) {
	rows, err := q.Query(ctx, withIDsSQL, org, namespace, memoryIDs)
	if err != nil {
		return nil, err
	}
	return Collect(rows)
}

// OneByID is the head an operation addressed by a memory id alone acts on, among the
// heads holding it (postgres-authority.md, "A memory id is not unique within an org"):
// the live heads in the namespaces the caller reaches must all lie in one namespace,
// where the newest acts, and none of them may be outside the caller's read scope
// (readUserID, "" for every user's). Otherwise it is nil, not found: a copy the caller
// may not see is never acted on in its stead, and tells it nothing.
func OneByID(withID []*memrow.Row, now time.Time, reaches func(namespace string) bool, readUserID string) *memrow.Row {
	var one *memrow.Row
	for _, h := range withID {
		if !h.Live(now) || !reaches(h.Namespace) {
			continue
		}
		if (readUserID != "" && h.UserID != readUserID) || (one != nil && one.Namespace != h.Namespace) {
			return nil
		}
		if one == nil || h.Version > one.Version {
			one = h
		}
	}
	return one
}
