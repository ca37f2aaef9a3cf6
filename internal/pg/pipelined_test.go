package pg_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loomplane/loom/internal/pg"
)

func TestPipelinedTxCommitsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	pool := freshDB(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY, v text)`); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	write := func(ids ...int) *pgx.Batch {
		b := &pgx.Batch{}
		for _, id := range ids {
			b.Queue(`INSERT INTO t VALUES ($1, 'x')`, id)
		}
		return b
	}

	// The first batch and the last one, with its COMMIT: both land.
	var txid, seen int64
	err := pg.InPipelinedTx(ctx, pool, func(tx pgx.Tx) (*pgx.Batch, error) {
		b := write(1)
		b.Queue(`SELECT txid_current()`).QueryRow(func(r pgx.Row) error { return r.Scan(&txid) })
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return nil, err
		}
		// A statement between them runs in the same transaction.
		if err := tx.QueryRow(ctx, `SELECT txid_current()`).Scan(&seen); err != nil {
			return nil, err
		}
		return write(2), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if txid != seen {
		t.Fatalf("statements ran in transactions %d and %d; want one", txid, seen)
	}
	if n := count(); n != 2 {
		t.Fatalf("%d rows after the commit; want 2", n)
	}

	// An error fn returns rolls back what its first batch wrote.
	refused := errors.New("refused")
	err = pg.InPipelinedTx(ctx, pool, func(tx pgx.Tx) (*pgx.Batch, error) {
		if err := tx.SendBatch(ctx, write(3)).Close(); err != nil {
			return nil, err
		}
		return nil, refused
	})
	if !errors.Is(err, refused) || count() != 2 {
		t.Fatalf("err %v, %d rows; want refused and 2 rows", err, count())
	}

	// A statement of the last batch the server refuses rolls all of it back, and the
	// outcome is known.
	err = pg.InPipelinedTx(ctx, pool, func(tx pgx.Tx) (*pgx.Batch, error) {
		if err := tx.SendBatch(ctx, write(4)).Close(); err != nil {
			return nil, err
		}
		return write(5, 1), nil // 1 is taken
	})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" || pg.OutcomeUnknown(err) || count() != 2 {
		t.Fatalf("err %v, %d rows; want a unique violation of known outcome and 2 rows", err, count())
	}

	// A transaction a swallowed error broke does not answer success.
	err = pg.InPipelinedTx(ctx, pool, func(tx pgx.Tx) (*pgx.Batch, error) {
		_ = tx.SendBatch(ctx, write(1)).Close()
		return write(6), nil
	})
	if err == nil || count() != 2 {
		t.Fatalf("err %v, %d rows; want an error and 2 rows", err, count())
	}

	// The pool hands out a clean connection afterwards.
	if err := pool.QueryRow(ctx, `SELECT 1`).Scan(new(int)); err != nil {
		t.Fatal(err)
	}
}
