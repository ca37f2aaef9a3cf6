package command

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The write side's statements of loom.generation_records: the erasure, redaction and
// turns records, kept as queueGenerationRecord (erasure_postgres.go) and
// queueTurnsRecord (observe.go) queue them for the relay, and republish's read.

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

// queueKeepGenerationRecord queues the kept copy of a record that carries no revision.
func queueKeepGenerationRecord(b *pgx.Batch, org, namespace string, seq int64, eventType string, key, headers, value []byte) {
	b.Queue(`INSERT INTO loom.generation_records (org, namespace, seq, event_type, record_key, headers, value)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, org, namespace, seq, eventType, key, headers, value)
}
