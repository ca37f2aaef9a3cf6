package store

import (
	"context"
	"fmt"
)

// FormatCount is a namespace's documents of one format: the live heads, the deleted
// ones, and the live heads' bytes and chunks.
type FormatCount struct {
	Format  string `json:"format"`
	Live    int64  `json:"live"`
	Deleted int64  `json:"deleted"`
	Bytes   int64  `json:"bytes"`
	Chunks  int64  `json:"chunks"`
}

// OpenJobs is a namespace's ingestion work not yet done: its jobs waiting for a run
// and in one, and their files still to write.
type OpenJobs struct {
	Pending      int64 `json:"pending"`
	Processing   int64 `json:"processing"`
	FilesPending int64 `json:"files_pending"`
}

// CountByFormat counts a namespace's heads in u by format, in format order.
func CountByFormat(ctx context.Context, q Querier, org, ns string, u Users) ([]FormatCount, error) {
	rows, err := q.Query(ctx, `SELECT format, count(*) FILTER (WHERE NOT deleted), count(*) FILTER (WHERE deleted),
		coalesce(sum(bytes) FILTER (WHERE NOT deleted), 0)::bigint, coalesce(sum(chunk_count) FILTER (WHERE NOT deleted), 0)::bigint
		FROM loom.knowledge_heads WHERE org = $1 AND namespace = $2 AND `+usersPredicate("user_id", "$1", "$3", "$4")+`
		GROUP BY format ORDER BY format`, org, ns, u.Scoped, u.User)
	if err != nil {
		return nil, fmt.Errorf("count the documents by format: %w", err)
	}
	defer rows.Close()
	out := []FormatCount{}
	for rows.Next() {
		var c FormatCount
		if err := rows.Scan(&c.Format, &c.Live, &c.Deleted, &c.Bytes, &c.Chunks); err != nil {
			return nil, fmt.Errorf("count the documents by format: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// CountOpenJobs counts a namespace's open ingestion jobs in u and their files still to
// write.
func CountOpenJobs(ctx context.Context, q Querier, org, ns string, u Users) (OpenJobs, error) {
	var o OpenJobs
	err := q.QueryRow(ctx, `SELECT count(*) FILTER (WHERE j.state = 'pending'), count(*) FILTER (WHERE j.state = 'processing'),
		coalesce(sum((SELECT count(*) FROM loom.knowledge_job_files f
			WHERE (f.org, f.namespace, f.ingestion_id) = (j.org, j.namespace, j.ingestion_id) AND f.state = 'pending')), 0)::bigint
		FROM loom.knowledge_jobs j WHERE j.org = $1 AND j.namespace = $2 AND j.state IN ('pending', 'processing')
		  AND `+usersPredicate("j.user_id", "$1", "$3", "$4"), org, ns, u.Scoped, u.User).
		Scan(&o.Pending, &o.Processing, &o.FilesPending)
	if err != nil {
		return o, fmt.Errorf("count the open ingestion jobs: %w", err)
	}
	return o, nil
}
