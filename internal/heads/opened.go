package heads

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/memrow"
)

// Sealed is what a read selects of a stored row (of memory_current or memory_revisions,
// aliased alias) to open it in Go (ScanOpened) rather than by loom.opened_row: the row
// without its text, the sealed text, the revision's stored data key and the user
// column (a reference). Opening ten heads in SQL cost Postgres about as much again as
// reading them (0.61 against 0.27 ms for a search's heads, measured), opening a write's
// one head 0.26–0.37 against 0.13–0.21 ms of backend CPU, and every reader holds the
// KEK ring anyway.
func Sealed(alias string) string {
	return fmt.Sprintf(`%[1]s.row, %[1]s.sealed, (SELECT rk.data_key FROM loom.revision_keys rk
			WHERE rk.org = %[1]s.org AND rk.namespace = %[1]s.namespace AND rk.seq = %[1]s.seq), %[1]s.user_id`, alias)
}

// manySealedSQL is manySQL with each head as stored (Sealed).
var manySealedSQL = `SELECT m.* FROM unnest($3::text[], $4::text[], $5::text[], $6::text[]) AS k(agent, user_id, session_id, memory_key)
	CROSS JOIN LATERAL (SELECT ` + Sealed("c") + ` FROM loom.memory_current c
		WHERE c.org = $1 AND c.namespace = $2 AND c.agent = k.agent AND c.user_id = loom.user_ref($1, k.user_id)
		  AND c.session_id = k.session_id AND c.memory_key = k.memory_key OFFSET 0) m`

// Unnamed holds the rows a read opened in Go whose user only their column names (a
// row sealed before migration 155, or whose text a redaction dropped): Name names them
// as loom.user_name does in SQL, then files them. Opened rows name their user in their
// text, so Name usually has nothing to do and costs no round trip.
type Unnamed struct {
	org     string
	pending []unnamedRow
}

type unnamedRow struct {
	row  *memrow.Row
	ref  string
	file func(*memrow.Row) // once named; nil when the row is filed already
}

// ScanOpened scans a row selected as Sealed (after dest, the columns before it) and
// opens it under ring. A row whose user only its column names is held in unnamed
// (for org) until Name: file, when not nil, is called once the row is named, and at
// once for every other row.
func ScanOpened(rows pgx.Rows, ring *kek.Ring, unnamed *Unnamed, org string, file func(*memrow.Row), dest ...any) (*memrow.Row, error) {
	var raw, sealed, dataKey []byte
	var ref string
	if err := rows.Scan(append(dest, &raw, &sealed, &dataKey, &ref)...); err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, nil // a cleared revision
	}
	row, err := openStored(ring, raw, sealed, dataKey)
	if err != nil {
		return nil, err
	}
	if row.UserID == "" && ref != "" && ref != memrow.DefaultIdentity {
		unnamed.org = org
		unnamed.pending = append(unnamed.pending, unnamedRow{row: row, ref: ref, file: file})
		return row, nil
	}
	if file != nil {
		file(row)
	}
	return row, nil
}

// QueueManyOpened queues Many's read on b, each row opened in Go under ring as
// loom.opened_row opens it in SQL. The value comes back as the commit sealed it, its
// canonical JSON (object keys in byte order, as the API documents), where jsonb orders
// keys by length first. into holds the heads, by IdentityKey, once b is sent and
// unnamed.Name has run.
func QueueManyOpened(b *pgx.Batch, ring *kek.Ring, unnamed *Unnamed, into map[string]*memrow.Row, org, namespace string, ids []memrow.Identity) {
	file := func(r *memrow.Row) { into[IdentityKey(r.Identity)] = r }
	b.Queue(manySealedSQL, manyArgs(org, namespace, ids)...).Query(func(rows pgx.Rows) error {
		return eachOpened(rows, ring, unnamed, org, file)
	})
}

// eachOpened opens every row of rows (selected as Sealed alone), filing each.
func eachOpened(rows pgx.Rows, ring *kek.Ring, unnamed *Unnamed, org string, file func(*memrow.Row)) error {
	defer rows.Close()
	for rows.Next() {
		if _, err := ScanOpened(rows, ring, unnamed, org, file); err != nil {
			return fmt.Errorf("read heads: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read heads: %w", err)
	}
	return nil
}

// Name names the rows whose user only their column names, in one round trip when
// there are any, and files them.
func (u *Unnamed) Name(ctx context.Context, q Querier) error {
	if len(u.pending) == 0 {
		return nil
	}
	refs := make([]string, len(u.pending))
	for i, p := range u.pending {
		refs[i] = p.ref
	}
	rows, err := q.Query(ctx, `SELECT r.ref, coalesce(loom.user_name($1, r.ref), '') FROM unnest($2::text[]) AS r(ref)`, u.org, refs)
	if err != nil {
		return fmt.Errorf("name the heads' users: %w", err)
	}
	names := map[string]string{}
	for rows.Next() {
		var ref, name string
		if err := rows.Scan(&ref, &name); err != nil {
			rows.Close()
			return fmt.Errorf("name the heads' users: %w", err)
		}
		names[ref] = name
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("name the heads' users: %w", err)
	}
	for _, p := range u.pending {
		p.row.UserID = names[p.ref]
		if p.file != nil {
			p.file(p.row)
		}
	}
	u.pending = nil
	return nil
}

// openStored is loom.opened_row's merge done in Go: the row's JSON, then every field its
// sealed text holds over it (OpenText). A row with no sealed text, or whose key was
// destroyed (an erasure, a redaction), is its JSON alone.
func openStored(ring *kek.Ring, raw, sealed, storedKey []byte) (*memrow.Row, error) {
	row, err := Decode(raw)
	if err != nil || sealed == nil || storedKey == nil {
		return row, err
	}
	key, err := kek.OpenKey(ring, storedKey)
	if err != nil {
		return nil, fmt.Errorf("open the revision's data key: %w", err)
	}
	if err := OpenText(key, sealed, row); err != nil {
		return nil, err
	}
	return row, nil
}
