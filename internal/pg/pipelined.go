package pg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// InPipelinedTx runs fn in a transaction as InTx does, in two round trips fewer: the
// BEGIN travels with fn's first statement or batch, and the COMMIT with the batch fn
// returns (nil: the COMMIT goes alone). A write that holds a lock from its first batch
// to its COMMIT holds it for one round trip less.
//
// The outcome is as InTx's: an error fn returns, or one the server answered to a
// statement of the last batch, rolled the transaction back; an answer lost on the way
// back from the last batch returns an error OutcomeUnknown recognises.
func InPipelinedTx(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) (*pgx.Batch, error)) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	// A connection released inside a transaction is closed by the pool, never reused.
	defer conn.Release()
	tx := &pipelinedTx{conn: conn.Conn()}
	defer tx.Rollback(context.WithoutCancel(ctx))
	last, err := fn(tx)
	if err != nil {
		return err
	}
	if last == nil {
		last = &pgx.Batch{}
	}
	// A transaction a statement broke answers its COMMIT with ROLLBACK, not an error.
	var tag pgconn.CommandTag
	last.Queue("commit").Exec(func(ct pgconn.CommandTag) error { tag = ct; return nil })
	if err := tx.SendBatch(ctx, last).Close(); err != nil {
		return &commitError{err}
	}
	tx.closed = true
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// pipelinedTx is a pgx.Tx whose BEGIN is sent with its first statement. It has no
// nested transactions and no large objects.
type pipelinedTx struct {
	conn   *pgx.Conn
	begun  bool
	closed bool
}

var errNested = errors.New("a pipelined transaction has no nested transactions")

func (t *pipelinedTx) begin(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	if t.begun {
		return nil
	}
	t.begun = true
	_, err := t.conn.Exec(ctx, "begin")
	return err
}

func (t *pipelinedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if !t.begun && !t.closed {
		t.begun = true
		withBegin := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+1)}
		withBegin.Queue("begin")
		withBegin.QueuedQueries = append(withBegin.QueuedQueries, b.QueuedQueries...)
		b = withBegin
	}
	return t.conn.SendBatch(ctx, b)
}

func (t *pipelinedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.begin(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.conn.Exec(ctx, sql, args...)
}

func (t *pipelinedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return t.conn.Query(ctx, sql, args...)
}

func (t *pipelinedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.begin(ctx); err != nil {
		return errRow{err}
	}
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *pipelinedTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.begin(ctx); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, cols, src)
}

func (t *pipelinedTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Prepare(ctx, name, sql)
}

func (t *pipelinedTx) Begin(context.Context) (pgx.Tx, error) { return nil, errNested }

func (t *pipelinedTx) LargeObjects() pgx.LargeObjects {
	panic(errors.New("a pipelined transaction has no large objects"))
}

func (t *pipelinedTx) Conn() *pgx.Conn { return t.conn }

// Commit commits what the transaction sent; InPipelinedTx commits with its last batch
// instead.
func (t *pipelinedTx) Commit(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	if !t.begun {
		return nil
	}
	tag, err := t.conn.Exec(ctx, "commit")
	if err != nil {
		return &commitError{err}
	}
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

func (t *pipelinedTx) Rollback(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	if !t.begun || t.conn.PgConn().TxStatus() == 'I' {
		return nil
	}
	if _, err := t.conn.Exec(ctx, "rollback"); err != nil {
		_ = t.conn.Close(ctx)
		return err
	}
	return nil
}

// errRow is a row whose query could not be sent.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
