package revisions

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
)

// Version is one committed revision of a key as the journal (loom.memory_revisions)
// holds it: a redacted one holds its scrubbed row (memory.redact rewrites it in place),
// an erased one is gone (erasure deletes it).
type Version struct {
	Event string // the record's event type, as the topic carries it
	Row   *memrow.Row
}

// keyVersionsSQL reads a key's revisions in version order, which is the order of
// memory_revisions_by_key: the index that binds every column named is also the one
// that needs no sort, so no plan (a generic one, or one made on stale statistics)
// prefers an index that binds only the namespace and filters its every revision.
// The row is read opened (heads.Row): its text is sealed at rest under its data key.
const keyVersionsSQL = heads.WithWriterRefs + `SELECT event_type, seq, ` + heads.Row + ` FROM loom.memory_revisions
	WHERE org = $1 AND namespace = $2 AND ` + heads.IdentityIs + `
	  AND row IS NOT NULL
	ORDER BY version`

// QueueKeyVersions queues the read of every version of one key on b, filling into once
// the batch is read, so a caller reads them in the same round trip as its other reads.
func QueueKeyVersions(b *pgx.Batch, id memrow.Identity, into *[]Version) {
	b.Queue(keyVersionsSQL, id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey).
		Query(func(rows pgx.Rows) error {
			vs, err := collectVersions(rows)
			*into = vs
			return err
		})
}

// KeyVersions reads every version of one key, oldest first; none when it has none.
func KeyVersions(ctx context.Context, q Querier, id memrow.Identity) ([]Version, error) {
	rows, err := q.Query(ctx, keyVersionsSQL, id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey)
	if err != nil {
		return nil, fmt.Errorf("read the key's versions: %w", err)
	}
	return collectVersions(rows)
}

// collectVersions keeps one row per version, the last committed when two share one,
// as ClickHouse's memory_versions (a ReplacingMergeTree ordered by the key and version)
// keeps them.
func collectVersions(rows pgx.Rows) ([]Version, error) {
	defer rows.Close()
	var vs []Version
	var lastSeq int64
	for rows.Next() {
		var v Version
		var seq int64
		var raw []byte
		if err := rows.Scan(&v.Event, &seq, &raw); err != nil {
			return nil, fmt.Errorf("read the key's versions: %w", err)
		}
		row, err := heads.Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("read the key's versions: %w", err)
		}
		v.Row = row
		if n := len(vs); n > 0 && vs[n-1].Row.Version == row.Version {
			if seq > lastSeq {
				vs[n-1], lastSeq = v, seq
			}
			continue
		}
		vs, lastSeq = append(vs, v), seq
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the key's versions: %w", err)
	}
	return vs, nil
}
