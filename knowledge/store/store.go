// Package store holds every statement over the knowledge plane's Postgres tables,
// loom.knowledge_heads and loom.knowledge_revisions (migration 070), for the plane's
// write side (the commit's locks and writes), its read side (point reads, lists, the
// serving check a search page takes) and the followers that open the plane's
// records (the revisions' data keys). An erasure's deletes of both tables are the
// erasure's (command/erasure_store.go, by internal/erasure's registry).
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/rowseal"
)

// Querier is a pool, a connection or a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Heading is one heading of a document's outline.
type Heading struct {
	Level int      `json:"level"`
	Title string   `json:"title"`
	Path  []string `json:"path,omitempty"`
}

// Text is the part of a head sealed at rest: what is the document's text or names it
// beyond its source URI.
type Text struct {
	Title       string            `json:"title"`
	ContentType string            `json:"content_type,omitempty"`
	Tags        []string          `json:"tags"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	// Body is the document as it was uploaded, byte for byte.
	Body    []byte    `json:"body"`
	Outline []Heading `json:"outline,omitempty"`
	Blocks  int       `json:"blocks"`
}

// Head is a source's head.
type Head struct {
	Org, Namespace, SourceURI string
	DocID                     string
	Version, Seq              int64
	Format                    string
	Deleted                   bool
	ChunkCount                int
	Bytes                     int64
	ChunksSeq, ChunksVersion  int64
	Actor                     string
	// UserID is the user the document was written for ("" for the namespace's): kept
	// as its reference (migration 157), answered in the clear.
	UserID               string
	CreatedAt, UpdatedAt time.Time
	Text                 *Text // nil when not read
}

// headColumns are a head's plain columns, in Head's order, with its text opened in SQL
// under its revision's key (unwrapped by the session's KEKs).
const headColumns = `h.source_uri, h.doc_id::text, h.version, h.seq, h.format, h.deleted, h.chunk_count, h.bytes,
	h.chunks_seq, h.chunks_version, h.actor, loom.user_name(h.org, h.user_id), h.created_at, h.updated_at`

const openedText = `decrypt(h.sealed, hmac('loom.row'::bytea, loom.unwrapped_key(k.data_key), 'sha256'), 'aes')`

func scanHead(org, ns string, r pgx.Row, withText bool) (*Head, error) {
	h := &Head{Org: org, Namespace: ns}
	dest := []any{&h.SourceURI, &h.DocID, &h.Version, &h.Seq, &h.Format, &h.Deleted, &h.ChunkCount, &h.Bytes,
		&h.ChunksSeq, &h.ChunksVersion, &h.Actor, &h.UserID, &h.CreatedAt, &h.UpdatedAt}
	var raw []byte
	if withText {
		dest = append(dest, &raw)
	}
	if err := r.Scan(dest...); err != nil {
		return nil, err
	}
	if withText {
		h.Text = &Text{}
		if err := json.Unmarshal(raw, h.Text); err != nil {
			return nil, fmt.Errorf("decode the head's text: %w", err)
		}
	}
	return h, nil
}

// ErrNoHead is a source with no head.
var ErrNoHead = errors.New("knowledge: the source has no head")

// Read reads a source's head with its text opened; ErrNoHead when it has none.
func Read(ctx context.Context, q Querier, org, ns, uri string) (*Head, error) {
	h, err := scanHead(org, ns, q.QueryRow(ctx, `SELECT `+headColumns+`, `+openedText+`
		FROM loom.knowledge_heads h JOIN loom.knowledge_revisions k USING (org, namespace, seq)
		WHERE h.org = $1 AND h.namespace = $2 AND h.source_uri = $3`, org, ns, uri), true)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNoHead
	}
	if err != nil {
		return nil, fmt.Errorf("read the head of %q: %w", uri, err)
	}
	return h, nil
}

// ReadMany reads the heads of uris with their text opened, in one statement: a source
// missing from the answer has no head.
func ReadMany(ctx context.Context, q Querier, org, ns string, uris []string) (map[string]*Head, error) {
	rows, err := q.Query(ctx, `SELECT `+headColumns+`, `+openedText+`
		FROM loom.knowledge_heads h JOIN loom.knowledge_revisions k USING (org, namespace, seq)
		WHERE h.org = $1 AND h.namespace = $2 AND h.source_uri = ANY($3)`, org, ns, uris)
	if err != nil {
		return nil, fmt.Errorf("read the heads: %w", err)
	}
	heads, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Head, error) { return scanHead(org, ns, r, true) })
	if err != nil {
		return nil, fmt.Errorf("read the heads: %w", err)
	}
	out := make(map[string]*Head, len(heads))
	for _, h := range heads {
		out[h.SourceURI] = h
	}
	return out, nil
}

// ListOptions narrow a list.
type ListOptions struct {
	Prefix         string // source URIs starting with it
	After          string // source URIs after it (the cursor)
	Limit          int
	IncludeDeleted bool
	Users          Users // whose documents
}

// Users is whose documents a read sees: every user's (the zero value), or, Scoped,
// the namespace's (no user) and User's ("" none more).
type Users struct {
	Scoped bool
	User   string
}

// Sees reports whether a document of userID ("" the namespace's) is in u.
func (u Users) Sees(userID string) bool { return !u.Scoped || userID == "" || userID == u.User }

// usersPredicate is u's predicate over a table's user column (its reference), with
// $scoped and $user the positions u's Scoped and User are bound at.
func usersPredicate(column, org, scoped, user string) string {
	return `(NOT ` + scoped + ` OR ` + column + ` = '' OR ` + column + ` = (SELECT loom.user_ref(` + org + `, ` + user + `)))`
}

// List lists a namespace's heads in source URI order, with their text.
func List(ctx context.Context, q Querier, org, ns string, o ListOptions) ([]*Head, error) {
	rows, err := q.Query(ctx, `SELECT `+headColumns+`, `+openedText+`
		FROM loom.knowledge_heads h JOIN loom.knowledge_revisions k USING (org, namespace, seq)
		WHERE h.org = $1 AND h.namespace = $2 AND h.source_uri > $3 AND starts_with(h.source_uri, $4) AND ($5 OR NOT h.deleted)
		  AND `+usersPredicate("h.user_id", "$1", "$7", "$8")+`
		ORDER BY h.source_uri LIMIT $6`, org, ns, o.After, o.Prefix, o.IncludeDeleted, o.Limit, o.Users.Scoped, o.Users.User)
	if err != nil {
		return nil, fmt.Errorf("list the heads: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Head, error) { return scanHead(org, ns, r, true) })
	if err != nil {
		return nil, fmt.Errorf("list the heads: %w", err)
	}
	return out, nil
}

// QueueLock queues, on b, the read of uris' heads under their row locks, in key order
// (the order every commit takes them in, so two commits never wait on each other
// crosswise); into holds them once the batch's results are read.
func QueueLock(b *pgx.Batch, org, ns string, uris []string, into map[string]*Head) {
	b.Queue(`SELECT `+headColumns+` FROM loom.knowledge_heads h
		WHERE h.org = $1 AND h.namespace = $2 AND h.source_uri = ANY($3) ORDER BY h.source_uri FOR UPDATE`, org, ns, uris).
		Query(func(rows pgx.Rows) error {
			heads, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Head, error) { return scanHead(org, ns, r, false) })
			if err != nil {
				return fmt.Errorf("lock the heads: %w", err)
			}
			for _, h := range heads {
				into[h.SourceURI] = h
			}
			return nil
		})
}

// QueueWrite queues, on b, a revision's key row and its head (sealed is the head's
// text sealed under the revision's key, wrappedKey that key wrapped under the KEK).
func QueueWrite(b *pgx.Batch, h *Head, event events.Type, wrappedKey, sealed []byte) {
	b.Queue(`INSERT INTO loom.knowledge_revisions (org, namespace, seq, source_uri, version, event_type, data_key, doc_id, user_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8::uuid, loom.named_user($1, $9))`,
		h.Org, h.Namespace, h.Seq, h.SourceURI, h.Version, string(event), wrappedKey, h.DocID, h.UserID)
	// A source keeps its first version's user (the commit refuses a write for
	// another), so the conflict leaves the head's user as it is.
	b.Queue(`INSERT INTO loom.knowledge_heads (org, namespace, source_uri, doc_id, version, seq, format, deleted,
			chunk_count, bytes, chunks_seq, chunks_version, actor, sealed, created_at, updated_at, user_id)
		VALUES ($1, $2, $3, $4::uuid, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, loom.named_user($1, $17))
		ON CONFLICT (org, namespace, source_uri) DO UPDATE SET doc_id = EXCLUDED.doc_id, version = EXCLUDED.version,
			seq = EXCLUDED.seq, format = EXCLUDED.format, deleted = EXCLUDED.deleted, chunk_count = EXCLUDED.chunk_count,
			bytes = EXCLUDED.bytes, chunks_seq = EXCLUDED.chunks_seq, chunks_version = EXCLUDED.chunks_version,
			actor = EXCLUDED.actor, sealed = EXCLUDED.sealed, updated_at = EXCLUDED.updated_at`,
		h.Org, h.Namespace, h.SourceURI, h.DocID, h.Version, h.Seq, h.Format, h.Deleted, h.ChunkCount, h.Bytes,
		h.ChunksSeq, h.ChunksVersion, h.Actor, sealed, h.CreatedAt, h.UpdatedAt, h.UserID)
}

// Serving is what a search page checks of a source's head.
type Serving struct {
	Version                  int64
	Deleted                  bool
	ChunksSeq, ChunksVersion int64
	DocID                    string
	// Seen says the document is in the read's Users.
	Seen bool
}

// ReadServing reads the serving state of uris' heads in one statement, and whether
// each is in u: a source missing from the answer has no head (nothing of it is
// served).
func ReadServing(ctx context.Context, q Querier, org, ns string, uris []string, u Users) (map[string]Serving, error) {
	rows, err := q.Query(ctx, `SELECT source_uri, version, deleted, chunks_seq, chunks_version, doc_id::text,
			`+usersPredicate("user_id", "$1", "$4", "$5")+` FROM loom.knowledge_heads
		WHERE org = $1 AND namespace = $2 AND source_uri = ANY($3)`, org, ns, uris, u.Scoped, u.User)
	if err != nil {
		return nil, fmt.Errorf("read the heads of a page: %w", err)
	}
	defer rows.Close()
	out := make(map[string]Serving, len(uris))
	for rows.Next() {
		var uri string
		var s Serving
		if err := rows.Scan(&uri, &s.Version, &s.Deleted, &s.ChunksSeq, &s.ChunksVersion, &s.DocID, &s.Seen); err != nil {
			return nil, fmt.Errorf("read the heads of a page: %w", err)
		}
		out[uri] = s
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the heads of a page: %w", err)
	}
	return out, nil
}

// LiveSources are the source URIs of a namespace that have a head: what a user's
// erasure left (the knowledge index drops the user's other sources by them, where it
// cannot compare references across a rotation of the org's key).
func LiveSources(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, org, ns string) (map[string]bool, error) {
	rows, err := q.Query(ctx, `SELECT source_uri FROM loom.knowledge_heads WHERE org = $1 AND namespace = $2`, org, ns)
	if err != nil {
		return nil, fmt.Errorf("read the knowledge sources of %s/%s: %w", org, ns, err)
	}
	uris, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read the knowledge sources of %s/%s: %w", org, ns, err)
	}
	live := make(map[string]bool, len(uris))
	for _, u := range uris {
		live[u] = true
	}
	return live, nil
}

// FetchKeys reads the data keys of knowledge records in one query, by record id,
// unwrapped by the session's KEKs. A record whose key is missing was erased.
func FetchKeys(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, recs []*events.Envelope) (map[string][]byte, error) {
	orgs := make([]string, len(recs))
	nss := make([]string, len(recs))
	seqs := make([]int64, len(recs))
	for i, e := range recs {
		orgs[i], nss[i], seqs[i] = e.Org, e.Namespace, e.Seq
	}
	rows, err := q.Query(ctx, `SELECT k.org, k.namespace, k.seq, loom.unwrapped_key(k.data_key)
		FROM loom.knowledge_revisions k
		JOIN unnest($1::text[], $2::text[], $3::bigint[]) AS b(org, namespace, seq)
		  ON k.org = b.org AND k.namespace = b.namespace AND k.seq = b.seq`, orgs, nss, seqs)
	if err != nil {
		return nil, fmt.Errorf("read knowledge revision keys: %w", err)
	}
	defer rows.Close()
	keys := make(map[string][]byte, len(recs))
	for rows.Next() {
		var org, ns string
		var seq int64
		var key []byte
		if err := rows.Scan(&org, &ns, &seq, &key); err != nil {
			return nil, fmt.Errorf("read knowledge revision keys: %w", err)
		}
		keys[events.RecordID(org, ns, seq)] = key
	}
	return keys, rows.Err()
}

// Seal seals a head's text under a key derived from its revision's data key, as
// loom.opened_row opens a memory row (migration 056): AES-256-CBC with PKCS#7 padding
// and a zero IV under HMAC-SHA256(dataKey, "loom.row"). The derived key seals this one
// plaintext only, so the fixed IV is never reused.
func Seal(t *Text, dataKey []byte) ([]byte, error) {
	plain, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("encode the head's text: %w", err)
	}
	sealed, err := rowseal.Seal(dataKey, rowseal.LabelRow, plain)
	if err != nil {
		return nil, fmt.Errorf("seal the head's text: %w", err)
	}
	return sealed, nil
}
