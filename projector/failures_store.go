package projector

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/heads"
)

// recordFailures upserts failures in tx. A record recorded again (a redelivery, a
// republished copy) takes the newer place on the topic, so the repair reads the
// newest copy; a record once failed stays failed (its reason kept) when it is held
// again, and only a failure counts an attempt.
func recordFailures(ctx context.Context, tx pgx.Tx, projection string, fs []failure) error {
	if len(fs) == 0 {
		return nil
	}
	n := len(fs)
	orgs, nss, topics, reasons := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	seqs, offsets := make([]int64, n), make([]int64, n)
	parts := make([]int32, n)
	held := make([]bool, n)
	for i, f := range fs {
		orgs[i], nss[i], seqs[i] = f.ns.org, f.ns.namespace, f.ref.seq
		topics[i], parts[i], offsets[i] = f.ref.topic, f.ref.partition, f.ref.offset
		reasons[i], held[i] = f.reason, f.held
	}
	_, err := tx.Exec(ctx, `INSERT INTO loom.projection_failures AS f
			(projection, org, namespace, seq, topic, record_partition, record_offset, held, reason, attempts)
		SELECT $1, org, namespace, seq, topic, part, off, held, reason, CASE WHEN held THEN 0 ELSE 1 END
		FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::int[], $7::bigint[], $8::bool[], $9::text[])
			AS u(org, namespace, seq, topic, part, off, held, reason)
		ON CONFLICT (projection, org, namespace, seq) DO UPDATE SET
			topic = EXCLUDED.topic, record_partition = EXCLUDED.record_partition,
			record_offset = GREATEST(f.record_offset, EXCLUDED.record_offset),
			held = f.held AND EXCLUDED.held,
			reason = CASE WHEN EXCLUDED.held AND NOT f.held THEN f.reason ELSE EXCLUDED.reason END,
			attempts = f.attempts + CASE WHEN EXCLUDED.held THEN 0 ELSE 1 END,
			last_failed_at = now()`,
		projection, orgs, nss, seqs, topics, parts, offsets, held, reasons)
	if err != nil {
		return fmt.Errorf("record %d projection failures: %w", n, err)
	}
	return nil
}

// resolveFailures deletes, in tx, the failures of the seqs a repair applied.
func resolveFailures(ctx context.Context, tx pgx.Tx, projection string, applied map[nsKey][]int64) error {
	var orgs, nss []string
	var seqs []int64
	for k, ss := range applied {
		for _, s := range ss {
			orgs, nss, seqs = append(orgs, k.org), append(nss, k.namespace), append(seqs, s)
		}
	}
	if len(seqs) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `DELETE FROM loom.projection_failures f
		USING unnest($2::text[], $3::text[], $4::bigint[]) AS u(org, namespace, seq)
		WHERE f.projection = $1 AND f.org = u.org AND f.namespace = u.namespace AND f.seq = u.seq`,
		projection, orgs, nss, seqs)
	if err != nil {
		return fmt.Errorf("resolve the repaired failures: %w", err)
	}
	return nil
}

// heldNamespaces are the namespaces among keys that have recorded failures.
func heldNamespaces(ctx context.Context, q heads.Querier, projection string, keys []nsKey) (map[nsKey]bool, error) {
	orgs, nss := splitKeys(keys)
	rows, err := q.Query(ctx, `SELECT DISTINCT f.org, f.namespace FROM loom.projection_failures f
		JOIN unnest($2::text[], $3::text[]) AS b(org, namespace) ON f.org = b.org AND f.namespace = b.namespace
		WHERE f.projection = $1`, projection, orgs, nss)
	if err != nil {
		return nil, fmt.Errorf("read the held namespaces: %w", err)
	}
	defer rows.Close()
	out := map[nsKey]bool{}
	for rows.Next() {
		var k nsKey
		if err := rows.Scan(&k.org, &k.namespace); err != nil {
			return nil, fmt.Errorf("read the held namespaces: %w", err)
		}
		out[k] = true
	}
	return out, rows.Err()
}

// listFailures reads up to limit recorded failures of a projection, a namespace's in
// seq order, the namespaces that failed longest ago first.
func listFailures(ctx context.Context, pool *pgxpool.Pool, projection string, limit int) ([]failure, error) {
	rows, err := pool.Query(ctx, `SELECT org, namespace, seq, topic, record_partition, record_offset, held, reason
		FROM loom.projection_failures f WHERE projection = $1
		ORDER BY (SELECT min(first_failed_at) FROM loom.projection_failures g
			WHERE g.projection = f.projection AND g.org = f.org AND g.namespace = f.namespace), org, namespace, seq
		LIMIT $2`, projection, limit)
	if err != nil {
		return nil, fmt.Errorf("read the projection's failures: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (failure, error) {
		var f failure
		err := row.Scan(&f.ns.org, &f.ns.namespace, &f.ref.seq, &f.ref.topic, &f.ref.partition, &f.ref.offset, &f.held, &f.reason)
		return f, err
	})
}

// noteRepairFailed records a repair attempt of a namespace's failures that failed
// again: one more attempt, and the new reason on the records that failed themselves.
func noteRepairFailed(ctx context.Context, pool *pgxpool.Pool, projection string, k nsKey, seqs []int64, reason string) error {
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	_, err := pool.Exec(ctx, `UPDATE loom.projection_failures SET attempts = attempts + 1, last_failed_at = now(),
			reason = CASE WHEN held THEN reason ELSE $5 END
		WHERE projection = $1 AND org = $2 AND namespace = $3 AND seq = ANY($4)`, projection, k.org, k.namespace, seqs, reason)
	if err != nil {
		return fmt.Errorf("note the failed repair of %s/%s: %w", k.org, k.namespace, err)
	}
	return nil
}

func splitKeys(keys []nsKey) (orgs, nss []string) {
	orgs, nss = make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		orgs[i], nss[i] = k.org, k.namespace
	}
	return orgs, nss
}

// FailureCounts counts a projection's recorded failures.
type FailureCounts struct {
	Failed     int64 `json:"failed"`     // records it could not apply
	Held       int64 `json:"held"`       // records held behind them
	Namespaces int64 `json:"namespaces"` // namespaces held, their watermarks stopped
}

func countFailures(ctx context.Context, q heads.Querier, projection string) (FailureCounts, error) {
	var s FailureCounts
	err := q.QueryRow(ctx, `SELECT count(*) FILTER (WHERE NOT held), count(*) FILTER (WHERE held),
			count(DISTINCT (org, namespace))
		FROM loom.projection_failures WHERE projection = $1`, projection).Scan(&s.Failed, &s.Held, &s.Namespaces)
	if err != nil {
		return s, fmt.Errorf("count the failures of projection %s: %w", projection, err)
	}
	return s, nil
}
