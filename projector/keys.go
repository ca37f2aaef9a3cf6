package projector

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
)

// querier is a pool or a connection.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// fetchKeys reads the data keys of a batch's revisions in one query.
func fetchKeys(ctx context.Context, q querier, revs []*events.Envelope) (map[string][]byte, error) {
	orgs := make([]string, len(revs))
	nss := make([]string, len(revs))
	seqs := make([]int64, len(revs))
	for i, e := range revs {
		orgs[i], nss[i], seqs[i] = e.Org, e.Namespace, e.Seq
	}
	rows, err := q.Query(ctx, `SELECT k.org, k.namespace, k.seq, k.data_key
		FROM loom.revision_keys k
		JOIN unnest($1::text[], $2::text[], $3::bigint[]) AS b(org, namespace, seq)
		  ON k.org = b.org AND k.namespace = b.namespace AND k.seq = b.seq`, orgs, nss, seqs)
	if err != nil {
		return nil, fmt.Errorf("read revision keys: %w", err)
	}
	defer rows.Close()
	keys := make(map[string][]byte, len(revs))
	for rows.Next() {
		var org, ns string
		var seq int64
		var key []byte
		if err := rows.Scan(&org, &ns, &seq, &key); err != nil {
			return nil, fmt.Errorf("read revision keys: %w", err)
		}
		keys[events.RecordID(org, ns, seq)] = key
	}
	return keys, rows.Err()
}
