package ch

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/loomplane/loom/internal/migrate"
)

// Locker serialises migrators across processes. ClickHouse has no lock of its own;
// loomd passes a Postgres advisory lock.
type Locker func(ctx context.Context) (unlock func(), err error)

const ledgerDDL = `CREATE TABLE IF NOT EXISTS loom.ch_migrations (
    filename       String,
    sha256         String,
    skipped        UInt8,
    server_version String,
    recorded_ns    UInt64,
    applied_at     DateTime
) ENGINE = ReplacingMergeTree(recorded_ns)
ORDER BY filename`

var requiresLine = regexp.MustCompile(`(?m)^--\s*requires:\s*clickhouse\s*>=\s*([0-9]+)\.([0-9]+)\s*$`)

// Requires returns the server version a file needs, from its `-- requires:` line.
func Requires(sql string) (major, minor int, ok bool) {
	m := requiresLine.FindStringSubmatch(sql)
	if m == nil {
		return 0, 0, false
	}
	major, _ = strconv.Atoi(m[1])
	minor, _ = strconv.Atoi(m[2])
	return major, minor, true
}

// Result is what a migration run did.
type Result struct {
	Applied []string
	Skipped []string // needs a newer server; recorded as skipped
}

type ledgerRow struct {
	migrate.Applied
	skipped bool
}

// Migrate applies the pending files of fsys under lock. A file the server is too old
// for is recorded as skipped, and applied by a later run once the server is new enough.
// On a cluster (conn.Cluster) every statement runs in its replicated form (ClusterDDL).
func Migrate(ctx context.Context, conn *Conn, fsys fs.FS, lock Locker, log *slog.Logger) (Result, error) {
	var res Result
	files, err := migrate.Load(fsys)
	if err != nil {
		return res, err
	}
	unlock, err := lock(ctx)
	if err != nil {
		return res, fmt.Errorf("lock ClickHouse migrations: %w", err)
	}
	defer unlock()
	ctx = conn.Ctx(ctx)
	for _, q := range []string{"CREATE DATABASE IF NOT EXISTS " + Database, ledgerDDL} {
		if err := conn.Exec(ctx, ClusterDDL(q, conn.Cluster)); err != nil {
			return res, fmt.Errorf("create the ClickHouse ledger: %w", err)
		}
	}
	ledger, err := readLedger(ctx, conn)
	if err != nil {
		return res, err
	}
	applied := make([]migrate.Applied, 0, len(ledger))
	skippedBefore := map[string]bool{}
	for _, r := range ledger {
		applied = append(applied, r.Applied)
		if r.skipped {
			skippedBefore[r.Name] = true
		}
	}
	plan, err := migrate.Compare(files, applied)
	if err != nil {
		return res, err
	}
	for _, n := range plan.Newer {
		log.Warn("ClickHouse migration from a newer build is applied; serving on its schema", "file", n)
	}
	pending := plan.Pending
	for _, f := range files {
		if skippedBefore[f.Name] {
			if maj, min, ok := Requires(f.SQL); ok && conn.Caps.AtLeast(maj, min) {
				pending = append(pending, f)
			}
		}
	}
	for _, f := range pending {
		if maj, min, ok := Requires(f.SQL); ok && !conn.Caps.AtLeast(maj, min) {
			if !skippedBefore[f.Name] {
				if err := record(ctx, conn, f, true); err != nil {
					return res, err
				}
				log.Info("skipped ClickHouse migration: server too old", "file", f.Name, "requires", fmt.Sprintf("%d.%d", maj, min), "server", conn.Caps.Version)
			}
			res.Skipped = append(res.Skipped, f.Name)
			continue
		}
		for i, stmt := range Statements(f.SQL) {
			if err := conn.Exec(ctx, ClusterDDL(stmt, conn.Cluster)); err != nil {
				return res, fmt.Errorf("apply ClickHouse migration %s, statement %d: %w", f.Name, i+1, err)
			}
		}
		if err := record(ctx, conn, f, false); err != nil {
			return res, err
		}
		log.Info("applied ClickHouse migration", "file", f.Name)
		res.Applied = append(res.Applied, f.Name)
	}
	return res, nil
}

// Statements splits a migration file into statements: each ends with a semicolon at
// the end of a line. Comment lines are dropped.
func Statements(sql string) []string {
	var out []string
	var cur []string
	for _, line := range strings.Split(sql, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur = append(cur, line)
		if strings.HasSuffix(t, ";") {
			stmt := strings.TrimSuffix(strings.TrimSpace(strings.Join(cur, "\n")), ";")
			out = append(out, stmt)
			cur = nil
		}
	}
	if len(cur) > 0 {
		out = append(out, strings.TrimSpace(strings.Join(cur, "\n")))
	}
	return out
}

func record(ctx context.Context, conn *Conn, f migrate.File, skipped bool) error {
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO loom.ch_migrations (filename, sha256, skipped, server_version, recorded_ns, applied_at)")
	if err != nil {
		return fmt.Errorf("record ClickHouse migration %s: %w", f.Name, err)
	}
	now := time.Now()
	var sk uint8
	if skipped {
		sk = 1
	}
	if err := batch.Append(f.Name, f.SHA256, sk, conn.Caps.Version, uint64(now.UnixNano()), now.UTC()); err != nil {
		return fmt.Errorf("record ClickHouse migration %s: %w", f.Name, err)
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("record ClickHouse migration %s: %w", f.Name, err)
	}
	return nil
}

func readLedger(ctx context.Context, conn *Conn) ([]ledgerRow, error) {
	rows, err := conn.Query(ctx, "SELECT filename, sha256, skipped FROM loom.ch_migrations FINAL ORDER BY filename")
	if err != nil {
		return nil, fmt.Errorf("read loom.ch_migrations: %w", err)
	}
	defer rows.Close()
	var out []ledgerRow
	for rows.Next() {
		var r ledgerRow
		var sk uint8
		if err := rows.Scan(&r.Name, &r.SHA256, &sk); err != nil {
			return nil, fmt.Errorf("read loom.ch_migrations: %w", err)
		}
		r.skipped = sk == 1
		out = append(out, r)
	}
	return out, rows.Err()
}

// Pending lists the files the server has neither applied nor skipped (readiness).
func Pending(ctx context.Context, conn *Conn, fsys fs.FS) ([]string, error) {
	files, err := migrate.Load(fsys)
	if err != nil {
		return nil, err
	}
	ledger, err := readLedger(conn.Ctx(ctx), conn)
	if err != nil {
		return nil, err
	}
	applied := make([]migrate.Applied, 0, len(ledger))
	for _, r := range ledger {
		applied = append(applied, r.Applied)
	}
	plan, err := migrate.Compare(files, applied)
	if err != nil {
		return nil, err
	}
	return plan.PendingNames(), nil
}
