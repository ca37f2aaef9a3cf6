package command

import (
	"context"
	"fmt"
)

// The write side's read of loom.generation_records (the erasure and redaction
// records, written by queueGenerationRecord in erasure_postgres.go).

// generationRecords reads the kept records of seqs from..to that carry no revision.
func generationRecords(ctx context.Context, q queryer, org, namespace string, from, to int64, topic string) ([]outboxEntry, error) {
	rows, err := q.Query(ctx, `SELECT seq, record_key, headers, value FROM loom.generation_records
		WHERE org = $1 AND namespace = $2 AND seq BETWEEN $3 AND $4 ORDER BY seq`, org, namespace, from, to)
	if err != nil {
		return nil, fmt.Errorf("read the erasure and redaction records of %s/%s: %w", org, namespace, err)
	}
	defer rows.Close()
	var out []outboxEntry
	for rows.Next() {
		e := outboxEntry{topic: topic}
		if err := rows.Scan(&e.seq, &e.key, &e.headers, &e.value); err != nil {
			return nil, fmt.Errorf("read the erasure and redaction records of %s/%s: %w", org, namespace, err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
