// Package generations owns the statements over loom.scope_generations: each
// namespace's generation (scope = the namespace), which is its last seq, and each
// org's policy generation (scope PolicyScope). A commit advances its namespace's
// generation to draw its seqs, under the row lock that orders the namespace's outbox
// rows; the barrier captures generations; erasure, redaction and republish take the
// same lock. docs/architecture.md describes the flows.
package generations

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// PolicyScope is the scope of an org's policy generation.
const PolicyScope = "*"

// ErrUnwritten: the namespace has no generation, nothing was ever committed in it.
var ErrUnwritten = errors.New("the namespace has no generation yet")

// Querier is a pool, a connection or a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

const readOne = `SELECT coalesce(max(generation), 0) FROM loom.scope_generations WHERE org = $1 AND scope = $2`

// QueueRead queues the read of a scope's generation (0 when it has none) on b into
// into, so a caller reads it in the same round trip as its other reads.
func QueueRead(b *pgx.Batch, org, scope string, into *int64) {
	b.Queue(readOne, org, scope).QueryRow(func(r pgx.Row) error { return r.Scan(into) })
}

// Read reads a scope's generation (0 when it has none).
func Read(ctx context.Context, q Querier, org, scope string) (int64, error) {
	var gen int64
	err := q.QueryRow(ctx, readOne, org, scope).Scan(&gen)
	return gen, err
}

const readMany = `SELECT scope, generation FROM loom.scope_generations WHERE org = $1 AND scope = ANY($2)`

// QueueReadMany queues the read of an org's namespaces' generations on b, filling into
// once the batch is read (a namespace with none reads 0), so a caller captures them in
// the same round trip as its other reads.
func QueueReadMany(b *pgx.Batch, org string, namespaces []string, into map[string]int64) {
	b.Queue(readMany, org, namespaces).Query(func(rows pgx.Rows) error { return collectMany(rows, namespaces, into) })
}

func collectMany(rows pgx.Rows, namespaces []string, into map[string]int64) error {
	defer rows.Close()
	for _, ns := range namespaces {
		into[ns] = 0
	}
	for rows.Next() {
		var ns string
		var g int64
		if err := rows.Scan(&ns, &g); err != nil {
			return err
		}
		into[ns] = g
	}
	return rows.Err()
}

const advance = `INSERT INTO loom.scope_generations (org, scope, generation) VALUES ($1, $2, $3)
	ON CONFLICT (org, scope) DO UPDATE SET generation = loom.scope_generations.generation + $3, updated_at = now()
	RETURNING generation`

// QueueAdvance queues advancing a scope's generation by n (a new scope starts at n)
// on b and reads the new generation into into. The row lock it takes holds until the
// transaction ends: a namespace's seqs n-1 below it on are this transaction's.
func QueueAdvance(b *pgx.Batch, org, scope string, n int64, into *int64) {
	b.Queue(advance, org, scope, n).QueryRow(func(r pgx.Row) error { return r.Scan(into) })
}

// QueueGiveBack queues giving back the last n of the seqs an advance in the same
// transaction drew (a group commit's plans that were left out), under the row lock
// the advance holds.
func QueueGiveBack(b *pgx.Batch, org, scope string, n int64) {
	b.Queue(`UPDATE loom.scope_generations SET generation = generation - $3 WHERE org = $1 AND scope = $2`, org, scope, n)
}

// Advance advances a scope's generation by n (a new scope starts at n), in tx, and
// returns the new generation.
func Advance(ctx context.Context, tx pgx.Tx, org, scope string, n int64) (int64, error) {
	var gen int64
	err := tx.QueryRow(ctx, advance, org, scope, n).Scan(&gen)
	return gen, err
}

// Bump advances an existing namespace's generation by one, in tx, under its row
// lock, and returns it: the seq of a record that carries no revision (an erasure's, a
// redaction's). ErrUnwritten when the namespace has no generation.
func Bump(ctx context.Context, tx pgx.Tx, org, namespace string) (int64, error) {
	var gen int64
	err := tx.QueryRow(ctx, `UPDATE loom.scope_generations SET generation = generation + 1, updated_at = now()
		WHERE org = $1 AND scope = $2 RETURNING generation`, org, namespace).Scan(&gen)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, ErrUnwritten
	}
	return gen, err
}

// Lock reads a namespace's generation under its row lock, in tx: no commit of the
// namespace lands until tx ends. ErrUnwritten when the namespace has none.
func Lock(ctx context.Context, tx pgx.Tx, org, namespace string) (int64, error) {
	var gen int64
	err := tx.QueryRow(ctx, `SELECT generation FROM loom.scope_generations WHERE org = $1 AND scope = $2 FOR UPDATE`,
		org, namespace).Scan(&gen)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, ErrUnwritten
	}
	return gen, err
}

// Generation is a namespace's generation.
type Generation struct {
	Org, Namespace string
	Generation     int64
}

// List lists the namespaces of org ("" = every org) named namespace ("" = every one)
// whose generation is at least from, by org and namespace.
func List(ctx context.Context, q Querier, org, namespace string, from int64) ([]Generation, error) {
	rows, err := q.Query(ctx, `SELECT org, scope, generation FROM loom.scope_generations
		WHERE scope <> $4 AND ($1 = '' OR org = $1) AND ($2 = '' OR scope = $2) AND generation >= $3
		ORDER BY org, scope`, org, namespace, from, PolicyScope)
	if err != nil {
		return nil, fmt.Errorf("list namespace generations: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Generation, error) {
		var g Generation
		err := r.Scan(&g.Org, &g.Namespace, &g.Generation)
		return g, err
	})
	if err != nil {
		return nil, fmt.Errorf("list namespace generations: %w", err)
	}
	return out, nil
}

// Names lists up to n names of org's namespaces that have a generation (a revision
// was committed in them) after the name after, in order; only, when not nil, narrows
// them to its names.
func Names(ctx context.Context, q Querier, org, after string, only []string, n int) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT scope FROM loom.scope_generations
		WHERE org = $1 AND scope <> $2 AND scope > $3 AND ($4::text[] IS NULL OR scope = ANY($4))
		ORDER BY scope LIMIT $5`, org, PolicyScope, after, only, n)
	if err != nil {
		return nil, fmt.Errorf("list namespace names: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list namespace names: %w", err)
	}
	return names, nil
}
