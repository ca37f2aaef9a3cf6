package boot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/pg"
)

// postgresAuthority is the memory authority this build serves; the other one a store
// may record, ClickHouse, belongs to builds that keep memory in ClickHouse alone.
const postgresAuthority = "postgres"

// ErrAuthority wraps every refusal of the recorded authority: the stores record
// another deployment, another authority, or none. A CLI command exits 2 on it.
var ErrAuthority = errors.New("recorded authority")

// recorded is what the two stores say about the deployment they serve.
type recorded struct {
	pgID        string // loom.authority's deployment id; "" when none is recorded
	chFound     bool   // loom.storage_authority holds a row
	chAuthority string
	chID        string
}

// authorityPlan is what a boot does about the record: the deployment id it serves
// under, and which store still has to record it.
type authorityPlan struct {
	id               string
	writePG, writeCH bool
}

// planAuthority decides, from the records and the configured id, whether this process
// may serve, and what a boot with migrations on (record) records first. A process must
// never serve one deployment's Postgres with another's ClickHouse: the projection would
// mix two journals, and the barrier would compare one's generations with the other's
// watermarks.
func planAuthority(configured string, r recorded, record bool) (authorityPlan, error) {
	if r.chFound && r.chAuthority != postgresAuthority {
		return authorityPlan{}, fmt.Errorf("ClickHouse records the %q memory authority for deployment %s; this build serves the Postgres authority", r.chAuthority, r.chID)
	}
	if r.pgID == "" && r.chFound {
		return authorityPlan{}, fmt.Errorf("Postgres (LOOM_PG_DSN) records no deployment while ClickHouse records deployment %s: is LOOM_PG_DSN the deployment's database?", r.chID)
	}
	if r.pgID != "" && r.chFound && r.chID != r.pgID {
		return authorityPlan{}, fmt.Errorf("Postgres records deployment %s and ClickHouse records deployment %s: the stores belong to different deployments", r.pgID, r.chID)
	}
	if configured != "" && r.pgID != "" && r.pgID != configured {
		return authorityPlan{}, fmt.Errorf("LOOM_DEPLOYMENT_ID is %s but Postgres (LOOM_PG_DSN) records deployment %s", configured, r.pgID)
	}
	p := authorityPlan{id: r.pgID}
	if p.id == "" {
		if !record {
			return authorityPlan{}, errors.New("Postgres records no deployment yet: a boot with LOOM_BOOT_MIGRATE on (or `loomd migrate`) migrates it and records the deployment first")
		}
		p.id, p.writePG = configured, true
		if p.id == "" {
			p.id = uuid.NewString()
		}
	}
	p.writeCH = record && !r.chFound
	return p, nil
}

// Authority reads both stores' records of the deployment and refuses a mismatch
// with each other or with configured (LOOM_DEPLOYMENT_ID, "" for any); with record
// (migrations on) it first records the deployment in a store that lacks it, under a
// lock so two first boots agree on one id. It returns the deployment id served.
func Authority(ctx context.Context, pool *pgxpool.Pool, conn *ch.Conn, configured string, record bool, log *slog.Logger) (string, error) {
	if record {
		unlock, err := pg.SessionLock(ctx, pool, pg.LockAuthority)
		if err != nil {
			return "", err
		}
		defer unlock()
	}
	r, err := readRecords(ctx, pool, conn)
	if err != nil {
		return "", err
	}
	plan, err := planAuthority(configured, r, record)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrAuthority, err)
	}
	if plan.writePG {
		if _, err := pool.Exec(ctx, `INSERT INTO loom.authority (authority, deployment_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
			postgresAuthority, plan.id); err != nil {
			return "", fmt.Errorf("record the deployment in Postgres: %w", err)
		}
		log.Info("recorded a new deployment", "deployment_id", plan.id)
	}
	if plan.writeCH {
		if err := recordInClickHouse(ctx, conn, plan.id); err != nil {
			return "", err
		}
	}
	return plan.id, nil
}

// PostgresRecord checks, before a command that touches Postgres alone (the token
// commands, which run while ClickHouse is down), that Postgres records a deployment,
// and the one configured (LOOM_DEPLOYMENT_ID, "" for any). It returns its id.
func PostgresRecord(ctx context.Context, pool *pgxpool.Pool, configured string) (string, error) {
	var id string
	err := pool.QueryRow(ctx, `SELECT deployment_id FROM loom.authority`).Scan(&id)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows), errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000"):
		return "", fmt.Errorf("%w: Postgres (LOOM_PG_DSN) records no deployment: run `loomd migrate` first", ErrAuthority)
	case err != nil:
		return "", fmt.Errorf("read loom.authority: %w", err)
	case configured != "" && id != configured:
		return "", fmt.Errorf("%w: LOOM_DEPLOYMENT_ID is %s but Postgres (LOOM_PG_DSN) records deployment %s", ErrAuthority, configured, id)
	}
	return id, nil
}

func readRecords(ctx context.Context, pool *pgxpool.Pool, conn *ch.Conn) (recorded, error) {
	var r recorded
	err := pool.QueryRow(ctx, `SELECT deployment_id FROM loom.authority`).Scan(&r.pgID)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000"): // not migrated: no table, no schema
	case err != nil:
		return r, fmt.Errorf("read loom.authority: %w", err)
	}
	cctx := conn.Ctx(ctx)
	var tables uint64
	if err := conn.QueryRow(cctx, "SELECT count() FROM system.tables WHERE database = ? AND name = 'storage_authority'", ch.Database).Scan(&tables); err != nil {
		return r, fmt.Errorf("look for loom.storage_authority: %w", err)
	}
	if tables == 0 {
		return r, nil // ClickHouse not migrated yet: nothing recorded
	}
	rows, err := conn.Query(cctx, "SELECT authority, deployment_id FROM loom.storage_authority FINAL WHERE singleton = 1")
	if err != nil {
		return r, fmt.Errorf("read loom.storage_authority: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := rows.Scan(&r.chAuthority, &r.chID); err != nil {
			return r, fmt.Errorf("read loom.storage_authority: %w", err)
		}
		r.chFound = true
	}
	return r, rows.Err()
}

func recordInClickHouse(ctx context.Context, conn *ch.Conn, id string) error {
	batch, err := conn.PrepareBatch(conn.Ctx(ctx), "INSERT INTO loom.storage_authority (singleton, authority, deployment_id, epoch, recorded_at)")
	if err == nil {
		err = batch.Append(uint8(1), postgresAuthority, id, uint64(1), time.Now().UTC())
	}
	if err == nil {
		err = batch.Send()
	}
	if err != nil {
		return fmt.Errorf("record the deployment in ClickHouse: %w", err)
	}
	return nil
}
