// Package pg is Loom's Postgres plumbing: the connection pool, the migrator, the
// advisory-lock helpers and the classification of errors that mean "Postgres is
// unavailable" (a retryable 503) rather than a bug.
package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/kek"
)

// PoolConfig sizes the pool.
type PoolConfig struct {
	DSN              string
	MinConns         int32
	MaxConns         int32
	StatementTimeout time.Duration
	ConnectTimeout   time.Duration
	// KEK is what each session is given to open the stored data keys in SQL
	// (kek.Ring.SessionValue, as the setting kek.SessionParam): in the startup packet,
	// which no statement log records. Empty: none.
	KEK string
	// Tracer sees every statement and batch the pool's sessions send (tests count a
	// request's round trips with it); nil: none.
	Tracer pgx.QueryTracer
}

// Open connects a pool in which every session runs with synchronous_commit = on: a
// write answers only once its commit is as durable as the cluster promises.
func Open(ctx context.Context, c PoolConfig) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(c.DSN)
	if err != nil {
		return nil, fmt.Errorf("parse LOOM_PG_DSN: %w", err)
	}
	if c.MaxConns > 0 {
		cfg.MaxConns = c.MaxConns
	}
	if c.MinConns > 0 {
		cfg.MinConns = c.MinConns
	}
	connectTimeout := c.ConnectTimeout
	if connectTimeout <= 0 {
		connectTimeout = 5 * time.Second
	}
	cfg.ConnConfig.ConnectTimeout = connectTimeout
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	// A cancelled context cuts the connection before any cancel request is answered,
	// so a COMMIT waiting for the synchronous standby is never read as a success (see InTx).
	cfg.ConnConfig.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: pc.Conn()}
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "loomd"
	if c.KEK != "" {
		cfg.ConnConfig.RuntimeParams[kek.SessionParam] = c.KEK
	}
	if c.StatementTimeout > 0 {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = fmt.Sprint(c.StatementTimeout.Milliseconds())
	}
	cfg.ConnConfig.Tracer = c.Tracer
	cfg.HealthCheckPeriod = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open Postgres pool: %w", err)
	}
	return pool, nil
}

// Unavailable reports whether err means Postgres could not be reached or dropped the
// session: the caller answers a retryable 503 POSTGRES_UNAVAILABLE.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	if pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case len(pgErr.Code) == 5 && pgErr.Code[:2] == "08": // connection exception
			return true
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // shutdown, crash, cannot connect now
			return true
		case pgErr.Code == "53300": // too many connections
			return true
		case pgErr.Code == "57014": // cancelled: statement_timeout ran out, or an operator cancelled it
			return true
		}
		return false
	}
	// A session cut mid-statement surfaces as a network error without a PgError.
	return pgconn.SafeToRetry(err) || isNetErr(err)
}

// ErrOutcomeUnknown is a COMMIT whose answer was lost: the transaction may or may not
// have committed. That includes a commit whose wait for the synchronous standby
// outlived the caller's deadline: it may have committed on the primary alone. A commit
// the server refused (an error it answered) rolled back, and is known.
var ErrOutcomeUnknown = errors.New("the commit's outcome is unknown")

// commitError is a COMMIT that failed.
type commitError struct{ err error }

func (e *commitError) Error() string { return "commit: " + e.err.Error() }
func (e *commitError) Unwrap() error { return e.err }

// Is makes a COMMIT the server did not answer ErrOutcomeUnknown.
func (e *commitError) Is(target error) bool {
	var pgErr *pgconn.PgError
	return target == ErrOutcomeUnknown && !errors.As(e.err, &pgErr)
}

// OutcomeUnknown reports whether err is (or wraps) ErrOutcomeUnknown.
func OutcomeUnknown(err error) bool { return errors.Is(err, ErrOutcomeUnknown) }

// Conflict reports a serialization failure, deadlock or lock timeout: the
// transaction changed nothing and may be run again.
func Conflict(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "40001", "40P01", "55P03":
		return true
	}
	return false
}

// InTx runs fn in a transaction and commits it; any error rolls it back. A commit
// whose answer is lost returns an error OutcomeUnknown recognises.
//
// ctx bounds the commit too. At the deadline the pool's context handling cuts the
// connection instead of waiting for the answer to a cancel request, and that matters:
// a cancel request reaching a COMMIT that waits for the synchronous standby makes
// Postgres end the wait with only a warning and answer success for a commit the
// standby may lack. Cut, the caller hears an error (outcome unknown). pgx still sends
// a cancel request as it closes the cut connection, so the server ends the wait all
// the same: the commit stands on the primary alone and is visible there at once.
// Nothing publishes it before the standbys hold it (relay/durable.go).
func InTx(ctx context.Context, pool interface {
	BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
}, fn func(pgx.Tx) error) error {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return &commitError{err}
	}
	return nil
}
