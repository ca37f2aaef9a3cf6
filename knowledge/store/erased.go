package store

import (
	"context"
	"fmt"
)

// Erased reports whether an erasure removed the version of the source a write was
// built from (by source and version, or by the doc_id of the head it read; docID ""
// names none), as loom.erased_documents keeps it (migration 120; the erasure saga in
// command/ writes and sweeps it). A commit reads it under the namespace's lock, which
// an erasure holds alone, so an erasure that removed the version is seen.
func Erased(ctx context.Context, q Querier, org, ns, uri string, version int64, docID string) (bool, error) {
	var erased bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM loom.erased_documents
		WHERE org = $1 AND namespace = $2 AND ((source_uri = $3 AND version = $4) OR doc_id = nullif($5, '')::uuid))`,
		org, ns, uri, version, docID).Scan(&erased)
	if err != nil {
		return false, fmt.Errorf("read the deletion evidence of %q: %w", uri, err)
	}
	return erased, nil
}
