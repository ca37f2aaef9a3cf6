// Package watermarks owns the statements over loom.projection_watermarks: per
// projection and namespace, the highest seq the projection has written to ClickHouse
// with every seq below it. The projector raises them after each batch and notifies
// Channel; the barrier and an admission read the serving projection's; a rebuild
// compares and hands them over. docs/architecture.md describes the flows.
package watermarks

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/generations"
)

// Channel is the NOTIFY channel a raise wakes barriers on; its payload is the projection.
const Channel = "loom_watermark"

// WantedChannel is the NOTIFY channel a barrier that found its projection behind calls
// the projectors on, so one that stretched its pace under steady writes
// (projector/pace.go) writes its next batch now instead of at the stretched pace's
// turn. Its payload is the projection.
const WantedChannel = "loom_projection_wanted"

// Want notifies the projection's projectors that a read waits for it.
func Want(ctx context.Context, q Querier, projection string) error {
	return q.QueryRow(ctx, `SELECT pg_notify('`+WantedChannel+`', $1)`, projection).Scan(nil)
}

// Querier is a pool, a connection or a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

const readOne = `SELECT coalesce(max(seq), 0) FROM loom.projection_watermarks WHERE projection = $1 AND org = $2 AND namespace = $3`

// QueueRead queues the read of a namespace's watermark (0 when it has none) on b
// into into: every revision at or below it is in ClickHouse.
func QueueRead(b *pgx.Batch, projection, org, namespace string, into *int64) {
	b.Queue(readOne, projection, org, namespace).QueryRow(func(r pgx.Row) error { return r.Scan(into) })
}

// Read reads a namespace's watermark (0 when it has none).
func Read(ctx context.Context, q Querier, projection, org, namespace string) (int64, error) {
	var wm int64
	err := q.QueryRow(ctx, readOne, projection, org, namespace).Scan(&wm)
	return wm, err
}

// ReadMany reads the watermarks of an org's namespaces; a namespace with none is absent.
func ReadMany(ctx context.Context, q Querier, projection, org string, namespaces []string) (map[string]int64, error) {
	rows, err := q.Query(ctx, `SELECT namespace, seq FROM loom.projection_watermarks
		WHERE projection = $1 AND org = $2 AND namespace = ANY($3)`, projection, org, namespaces)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var ns string
		var seq int64
		if err := rows.Scan(&ns, &seq); err != nil {
			return nil, err
		}
		out[ns] = seq
	}
	return out, rows.Err()
}

// Key is one namespace of one org.
type Key struct{ Org, Namespace string }

// ReadKeys reads the watermarks of the namespaces orgs[i]/namespaces[i]; a namespace
// with none is absent. With lock it takes their rows, in q's transaction, in key
// order, so two projectors of one projection (a rebalance in flight) advance them one
// at a time.
func ReadKeys(ctx context.Context, q Querier, projection string, orgs, namespaces []string, lock bool) (map[Key]int64, error) {
	sql := `SELECT w.org, w.namespace, w.seq FROM loom.projection_watermarks w
		JOIN unnest($2::text[], $3::text[]) AS b(org, namespace) ON w.org = b.org AND w.namespace = b.namespace
		WHERE w.projection = $1
		ORDER BY w.org, w.namespace`
	if lock {
		sql += ` FOR UPDATE OF w`
	}
	out, err := readMarks(ctx, q, sql, projection, orgs, namespaces)
	if err != nil {
		return nil, fmt.Errorf("read watermarks: %w", err)
	}
	return out, nil
}

// ReadProjection reads every watermark of projection.
func ReadProjection(ctx context.Context, q Querier, projection string) (map[Key]int64, error) {
	out, err := readMarks(ctx, q, `SELECT org, namespace, seq FROM loom.projection_watermarks WHERE projection = $1`, projection)
	if err != nil {
		return nil, fmt.Errorf("read the watermarks of projection %s: %w", projection, err)
	}
	return out, nil
}

// readMarks runs a query of (org, namespace, seq) rows into a map.
func readMarks(ctx context.Context, q Querier, sql string, args ...any) (map[Key]int64, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[Key]int64{}
	for rows.Next() {
		var k Key
		var seq int64
		if err := rows.Scan(&k.Org, &k.Namespace, &seq); err != nil {
			return nil, err
		}
		out[k] = seq
	}
	return out, rows.Err()
}

// Exists reports whether projection has ever raised a watermark.
func Exists(ctx context.Context, q Querier, projection string) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM loom.projection_watermarks WHERE projection = $1)`, projection).Scan(&ok)
	return ok, err
}

// QueueRaise queues raising the namespaces' watermarks to marks (never lowering one)
// and the notification of the projection's barriers, on b.
func QueueRaise(b *pgx.Batch, projection string, orgs, namespaces []string, marks []int64) {
	b.Queue(`INSERT INTO loom.projection_watermarks (projection, org, namespace, seq)
		SELECT $1, * FROM unnest($2::text[], $3::text[], $4::bigint[])
		ON CONFLICT (projection, org, namespace) DO UPDATE
		SET seq = GREATEST(loom.projection_watermarks.seq, EXCLUDED.seq), updated_at = now()`, projection, orgs, namespaces, marks)
	QueueNotify(b, projection)
}

// QueueNotify queues the notification that wakes the projection's barriers.
func QueueNotify(b *pgx.Batch, projection string) {
	b.Queue(`SELECT pg_notify('`+Channel+`', $1)`, projection)
}

// QueueAdopt queues, on b, projection taking every watermark of from (never lowering
// one of its own) and from's being forgotten: a rebuilt projection's switch.
func QueueAdopt(b *pgx.Batch, projection, from string) {
	b.Queue(`INSERT INTO loom.projection_watermarks (projection, org, namespace, seq)
		SELECT $1, org, namespace, seq FROM loom.projection_watermarks WHERE projection = $2
		ON CONFLICT (projection, org, namespace) DO UPDATE
		SET seq = GREATEST(loom.projection_watermarks.seq, EXCLUDED.seq), updated_at = now()`, projection, from)
	QueueForget(b, from)
}

// QueueForget queues the deletion of a projection's watermarks on b.
func QueueForget(b *pgx.Batch, projection string) {
	b.Queue(`DELETE FROM loom.projection_watermarks WHERE projection = $1`, projection)
}

// Distance is how far one projection's watermarks stand from another's.
type Distance struct {
	Namespaces int64 // namespaces where it is behind
	Seqs       int64 // seqs it is behind, summed over them
	Applied    int64 // the sum of its own watermarks, which grows while it applies records
}

// Measure reads how far building's watermarks stand from serving's.
func Measure(ctx context.Context, q Querier, serving, building string) (Distance, error) {
	var d Distance
	err := q.QueryRow(ctx, `SELECT count(*) FILTER (WHERE s.seq > coalesce(b.seq, 0)),
			coalesce(sum(s.seq - coalesce(b.seq, 0)) FILTER (WHERE s.seq > coalesce(b.seq, 0)), 0)::bigint,
			(SELECT coalesce(sum(seq), 0)::bigint FROM loom.projection_watermarks WHERE projection = $2)
		FROM loom.projection_watermarks s
		LEFT JOIN loom.projection_watermarks b ON b.projection = $2 AND b.org = s.org AND b.namespace = s.namespace
		WHERE s.projection = $1`, serving, building).Scan(&d.Namespaces, &d.Seqs, &d.Applied)
	return d, err
}

// Behind is a namespace whose watermark is below its generation.
type Behind struct {
	Org        string `json:"org"`
	Namespace  string `json:"namespace"`
	Generation int64  `json:"generation"`
	Watermark  int64  `json:"watermark"`
}

// Lag is how far a projection is behind the Postgres journal.
type Lag struct {
	NamespacesBehind int64    `json:"namespaces_behind"`
	SeqsBehind       int64    `json:"seqs_behind"`
	Behind           []Behind `json:"behind"` // the furthest behind first, at most limit
}

// ReadLag compares every namespace's generation (loom.scope_generations, read here
// alone because the comparison is one join) with the projection's watermark. It reads
// every namespace: a health probe asks for it, not a hot path.
func ReadLag(ctx context.Context, q Querier, projection string, limit int) (Lag, error) {
	lag := Lag{Behind: []Behind{}}
	rows, err := q.Query(ctx, `WITH behind AS (
			SELECT g.org, g.scope AS namespace, g.generation, coalesce(w.seq, 0) AS watermark
			FROM loom.scope_generations g
			LEFT JOIN loom.projection_watermarks w ON w.projection = $1 AND w.org = g.org AND w.namespace = g.scope
			WHERE g.scope <> $3 AND g.generation > coalesce(w.seq, 0))
		SELECT org, namespace, generation, watermark, count(*) OVER (), sum(generation - watermark) OVER ()
		FROM behind ORDER BY generation - watermark DESC, org, namespace LIMIT $2`, projection, limit, generations.PolicyScope)
	if err != nil {
		return lag, fmt.Errorf("read projection lag: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var l Behind
		if err := rows.Scan(&l.Org, &l.Namespace, &l.Generation, &l.Watermark, &lag.NamespacesBehind, &lag.SeqsBehind); err != nil {
			return lag, fmt.Errorf("read projection lag: %w", err)
		}
		lag.Behind = append(lag.Behind, l)
	}
	return lag, rows.Err()
}

// Standing is one namespace's generation and the projection's watermark of it.
type Standing struct {
	Org        string `json:"org"`
	Namespace  string `json:"namespace"`
	Generation int64  `json:"generation"`
	Watermark  int64  `json:"watermark"`
}

// ReadStandings reads every namespace's generation and projection's watermark of it,
// at most limit of them (those behind first, the furthest first, then the most recently
// written), and how many namespaces there are: the operator's per-namespace view of the
// lag (ReadLag names only those behind).
func ReadStandings(ctx context.Context, q Querier, projection string, limit int) ([]Standing, int64, error) {
	rows, err := q.Query(ctx, `SELECT g.org, g.scope, g.generation, coalesce(w.seq, 0), count(*) OVER ()
		FROM loom.scope_generations g
		LEFT JOIN loom.projection_watermarks w ON w.projection = $1 AND w.org = g.org AND w.namespace = g.scope
		WHERE g.scope <> $3
		ORDER BY g.generation - coalesce(w.seq, 0) DESC, g.updated_at DESC, g.org, g.scope LIMIT $2`, projection, limit, generations.PolicyScope)
	if err != nil {
		return nil, 0, fmt.Errorf("read the namespaces' standing: %w", err)
	}
	defer rows.Close()
	out := []Standing{}
	var total int64
	for rows.Next() {
		var s Standing
		if err := rows.Scan(&s.Org, &s.Namespace, &s.Generation, &s.Watermark, &total); err != nil {
			return nil, 0, fmt.Errorf("read the namespaces' standing: %w", err)
		}
		out = append(out, s)
	}
	return out, total, rows.Err()
}
