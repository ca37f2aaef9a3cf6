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
//
// A redacted row's text (its key and user) is sealed under its redaction's key, kept
// on the revision at its seq (migration 175): read only when the revision's key is
// gone.
func Sealed(alias string) string {
	return fmt.Sprintf(`%[1]s.row, %[1]s.sealed, coalesce((SELECT rk.data_key FROM loom.revision_keys rk
			WHERE rk.org = %[1]s.org AND rk.namespace = %[1]s.namespace AND rk.seq = %[1]s.seq),
		(SELECT rv.redaction_key FROM loom.memory_revisions rv
			WHERE %[1]s.sealed IS NOT NULL AND rv.org = %[1]s.org AND rv.namespace = %[1]s.namespace AND rv.seq = %[1]s.seq)), %[1]s.user_id`, alias)
}

// manySealedSQL is manySQL with each head as stored (Sealed).
var manySealedSQL = `SELECT m.* FROM ` + identitiesRefs + `
	CROSS JOIN LATERAL (SELECT ` + Sealed("c") + ` FROM loom.memory_current c WHERE ` + identityOfK + ` OFFSET 0) m`

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
// opens it under ring: nil for a cleared revision. When the row's text does not name
// its user, ref is the user's reference, for Unnamed.Hold.
func ScanOpened(rows pgx.Rows, ring *kek.Ring, dest ...any) (row *memrow.Row, ref string, err error) {
	var raw, sealed, dataKey []byte
	var column string
	if err := rows.Scan(append(dest, &raw, &sealed, &dataKey, &column)...); err != nil {
		return nil, "", err
	}
	if raw == nil {
		return nil, "", nil
	}
	if row, err = openStored(ring, raw, sealed, dataKey); err != nil {
		return nil, "", err
	}
	if row.UserID == "" && column != "" && column != memrow.DefaultIdentity {
		return row, column, nil
	}
	return row, "", nil
}

// Hold keeps row, of org, for Name to name from its user's reference ref and then
// file (nil: the row is filed already, and only its user is set).
func (u *Unnamed) Hold(org string, row *memrow.Row, ref string, file func(*memrow.Row)) {
	u.org = org
	u.pending = append(u.pending, unnamedRow{row: row, ref: ref, file: file})
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

// eachOpened opens every row of rows (selected as Sealed alone) and files it, at once
// or, when its user must be named, by unnamed.Name.
func eachOpened(rows pgx.Rows, ring *kek.Ring, unnamed *Unnamed, org string, file func(*memrow.Row)) error {
	defer rows.Close()
	for rows.Next() {
		row, ref, err := ScanOpened(rows, ring)
		if err != nil {
			return fmt.Errorf("read heads: %w", err)
		}
		if ref != "" {
			unnamed.Hold(org, row, ref, file)
		} else if row != nil {
			file(row)
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
