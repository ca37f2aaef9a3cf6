package pgtest

import (
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// NoRows is a batch's results as Postgres gives them for a read that finds no row:
// a queued query's callback run over NoRows{} scans pgx.ErrNoRows. It lets a test run
// what a batch queued without a server.
type NoRows struct{}

func (NoRows) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, nil }
func (NoRows) Query() (pgx.Rows, error)         { return nil, pgx.ErrNoRows }
func (NoRows) QueryRow() pgx.Row                { return noRow{} }
func (NoRows) Close() error                     { return nil }
func (NoRows) Tx() pgx.Tx                       { return nil }

type noRow struct{}

func (noRow) Scan(...any) error { return pgx.ErrNoRows }
