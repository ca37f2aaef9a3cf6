package devstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Database is the database Loom uses in the private cluster; User owns it.
const (
	Database = "loom"
	User     = "loom"
)

// Postgres is a private cluster run from the installed server binaries: a primary,
// or a streaming standby of one.
type Postgres struct {
	dir     string
	durable bool
	log     io.Writer
	// primary makes this cluster a streaming standby of it, connecting as standbyName.
	primary *Postgres

	bin    string
	as     *runAs
	exited <-chan struct{} // closed once the server started last has exited
	pid    int             // the postmaster started last, the leader of its process group
	Port   int
}

// StandbyName is the application_name a devstack standby streams as, and what the
// primary's synchronous_standby_names names.
const StandbyName = "loom_standby"

// DSN is the connection string of the loom database.
func (p *Postgres) DSN() string { return p.DSNForDatabase(Database) }

// findPostgresBin returns the bin directory of the newest installed server.
func findPostgresBin() (string, error) {
	if d := os.Getenv("LOOM_PG_BIN"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) > pgMajor(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no Postgres server found under /usr/lib/postgresql/*/bin: install the Debian package postgresql (make deps), or set LOOM_PG_BIN")
}

func pgMajor(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func (p *Postgres) data() string { return filepath.Join(p.dir, "data") }

// DataDir is the server's data directory (its table files, pg_wal, its logs).
func (p *Postgres) DataDir() string { return p.data() }

// Start initialises the cluster on first use and starts it on a free port.
func (p *Postgres) Start(ctx context.Context) error { return p.start(ctx) }

func (p *Postgres) start(ctx context.Context, extra ...string) error {
	bin, err := findPostgresBin()
	if err != nil {
		return err
	}
	p.bin = bin
	if p.as, err = accountFor("postgres"); err != nil {
		return err
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", p.dir, err)
	}
	if err := p.as.own(p.dir); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(p.data(), "PG_VERSION")); err != nil {
		if err := p.initialise(ctx); err != nil {
			return err
		}
	}
	// A server left running by a killed `loomd dev` (one from before servers died
	// with their parent, or one whose parent-death signal was lost) holds the data directory.
	if p.running() {
		logf(p.log, "stopping a Postgres left running on %s", p.data())
		if err := p.Stop(); err != nil {
			return err
		}
	}
	ports, err := stickyPorts(filepath.Join(p.dir, "port"), 1)
	if err != nil {
		return err
	}
	p.Port = ports[0]
	if err := p.as.own(p.dir); err != nil {
		return err
	}
	settings := []string{
		"listen_addresses=127.0.0.1",
		"unix_socket_directories=",
		"max_connections=200",
		"shared_buffers=128MB",
	}
	if !p.durable {
		settings = append(settings, "fsync=off", "full_page_writes=off")
	}
	args := []string{"-D", p.data(), "-p", strconv.Itoa(p.Port)}
	for _, s := range append(settings, extra...) {
		args = append(args, "-c", s)
	}
	logf(p.log, "starting Postgres (%s) on 127.0.0.1:%d", bin, p.Port)
	logFile := filepath.Join(p.dir, "server.log")
	out, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open the Postgres log: %w", err)
	}
	// The postmaster itself is the child (pg_ctl would start it detached), so it gets
	// the parent-death signal: SIGINT is a fast shutdown, committed data kept.
	cmd := p.as.command(filepath.Join(bin, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = out, out
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// Its own process group: Ctrl-C in the terminal reaches loomd, which stops the
	// server in order, instead of reaching the server directly.
	cmd.SysProcAttr.Setpgid = true
	exited, err := startTied(cmd, syscall.SIGINT, func() { out.Close() })
	if err != nil {
		out.Close()
		return fmt.Errorf("start Postgres: %w", err)
	}
	p.exited, p.pid = exited, cmd.Process.Pid
	if err := p.waitReady(ctx, cmd.Process.Pid, 60*time.Second); err != nil {
		return fmt.Errorf("start Postgres: %w\n%s", err, tail(logFile, 20))
	}
	if p.primary != nil {
		return nil // read-only: the database comes from the primary
	}
	return p.createDatabase(ctx)
}

// waitReady waits until the postmaster of pid says, in postmaster.pid, that it accepts
// connections (a primary "ready", a hot standby "standby"), as pg_ctl -w does.
func (p *Postgres) waitReady(ctx context.Context, pid int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if b, err := os.ReadFile(filepath.Join(p.data(), "postmaster.pid")); err == nil {
			lines := strings.Split(string(b), "\n")
			if len(lines) > 7 && strings.TrimSpace(lines[0]) == strconv.Itoa(pid) {
				if st := strings.TrimSpace(lines[7]); st == "ready" || st == "standby" {
					return nil
				}
			}
		}
		select {
		case <-p.exited:
			return errors.New("the server exited during start")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server did not accept connections within %s", limit)
		}
	}
}

// initialise creates the data directory: initdb for a primary; for a standby, a base
// backup of the primary with -R (standby.signal and primary_conninfo), streaming as
// StandbyName so the primary's synchronous_standby_names can name it.
func (p *Postgres) initialise(ctx context.Context) error {
	if p.primary == nil {
		logf(p.log, "initialising a Postgres cluster in %s", p.data())
		args := []string{"-D", p.data(), "-U", User, "--auth=trust", "-E", "UTF8", "--no-locale"}
		if !p.durable {
			args = append(args, "--no-sync")
		}
		if out, err := p.as.command(filepath.Join(p.bin, "initdb"), args...).CombinedOutput(); err != nil {
			return fmt.Errorf("initdb %s: %w\n%s", p.data(), err, out)
		}
		return nil
	}
	logf(p.log, "taking a base backup of the primary on port %d into %s", p.primary.Port, p.data())
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=%s application_name=%s", p.primary.Port, User, StandbyName)
	args := []string{"-D", p.data(), "-d", conninfo, "-R", "-X", "stream", "-c", "fast"}
	if !p.durable {
		args = append(args, "--no-sync")
	}
	cmd := p.as.command(filepath.Join(p.bin, "pg_basebackup"), args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_basebackup from port %d: %w\n%s", p.primary.Port, err, out)
	}
	// -R writes the connection it used; say the application_name explicitly, since
	// the primary's synchronous_standby_names matches on it.
	f, err := os.OpenFile(filepath.Join(p.data(), "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("configure the standby: %w", err)
	}
	_, err = fmt.Fprintf(f, "primary_conninfo = '%s'\n", conninfo)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("configure the standby: %w", err)
	}
	return nil
}

// StartDetached starts a stopped standby without its primary connection: it serves
// (read-only) exactly the WAL it had received, which is what a failover would promote.
func (p *Postgres) StartDetached(ctx context.Context) error {
	if p.primary == nil {
		return errors.New("StartDetached: not a standby")
	}
	return p.start(ctx, "primary_conninfo=")
}

// Promote ends a running standby's recovery (pg_ctl promote): it becomes a primary
// on a new timeline, serving and accepting writes from exactly the WAL it had
// received, as an HA manager's failover makes it. It names no synchronous standby
// of its own.
func (p *Postgres) Promote() error {
	if p.primary == nil {
		return errors.New("Promote: not a standby")
	}
	// -w returns once the control file says the cluster is in production.
	out, err := p.as.command(filepath.Join(p.bin, "pg_ctl"), "-D", p.data(), "-w", "-t", "60", "promote").CombinedOutput()
	if err != nil {
		return fmt.Errorf("promote the standby: %w\n%s", err, out)
	}
	p.primary = nil // a primary now: a restart starts it as one
	return nil
}

// DSNForDatabase is the connection string of another database of the cluster.
func (p *Postgres) DSNForDatabase(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", User, p.Port, db)
}

// FreshDatabase drops the database name if it exists, creates it empty and returns its
// DSN: a test's own database on the shared cluster.
func (p *Postgres) FreshDatabase(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, p.DSN())
	if err != nil {
		return "", fmt.Errorf("connect to Postgres: %w", err)
	}
	defer conn.Close(ctx)
	for _, stmt := range []string{"DROP DATABASE IF EXISTS " + name, "CREATE DATABASE " + name} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return "", fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return p.DSNForDatabase(name), nil
}

func (p *Postgres) running() bool {
	cmd := p.as.command(filepath.Join(p.bin, "pg_ctl"), "-D", p.data(), "status")
	return cmd.Run() == nil
}

func (p *Postgres) createDatabase(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	dsn := fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", User, p.Port)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect to the new Postgres: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", Database).Scan(&exists); err != nil {
		return fmt.Errorf("look for database %s: %w", Database, err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+Database); err != nil {
			return fmt.Errorf("create database %s: %w", Database, err)
		}
	}
	return nil
}

// Stop shuts the cluster down (fast mode: open sessions are cut, committed data kept).
func (p *Postgres) Stop() error { return p.stop("fast") }

// stop shuts the cluster down in pg_ctl's mode: immediate skips the shutdown
// checkpoint, for a cluster whose data is thrown away.
func (p *Postgres) stop(mode string) error {
	if p.as == nil {
		return nil
	}
	if !p.running() {
		return nil
	}
	out, err := p.as.command(filepath.Join(p.bin, "pg_ctl"), "-D", p.data(), "-m", mode, "-w", "-t", "60", "stop").CombinedOutput()
	if err != nil {
		return fmt.Errorf("stop Postgres: %w\n%s", err, out)
	}
	if p.exited != nil {
		<-p.exited // reaped: nothing of it is left
	}
	return nil
}

// RequireSyncStandby names the devstack standby in the primary's
// synchronous_standby_names (empty names: none) and, when naming it, waits until it
// streams in sync: from then on every commit waits for it.
func (p *Postgres) RequireSyncStandby(ctx context.Context, names string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.DSN())
	if err != nil {
		return fmt.Errorf("connect to the primary: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = "+quoteLiteral(names)); err != nil {
		return fmt.Errorf("set synchronous_standby_names: %w", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return fmt.Errorf("reload the primary's configuration: %w", err)
	}
	for names != "" {
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_replication WHERE application_name = $1 AND sync_state = 'sync'", StandbyName).Scan(&n)
		if err != nil {
			return fmt.Errorf("wait for the standby to stream in sync: %w", err)
		}
		if n > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Restart starts a stopped cluster again on the same port: a fault test's "Postgres is back".
func (p *Postgres) Restart(ctx context.Context) error {
	if p.running() {
		return nil
	}
	return p.Start(ctx)
}

// Psql returns a psql command line for the cluster, for a developer's terminal.
func (p *Postgres) Psql() string {
	return fmt.Sprintf("psql 'postgres://%s@127.0.0.1:%d/%s'", User, p.Port, Database)
}

func tail(file string, n int) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// RunWithPostgres runs a package's tests (run, a TestMain's m.Run) over a Postgres of
// their own, no ClickHouse or Kafka, set in into before they run, and returns their exit
// code. A Postgres that cannot start fails the run: a test never skips its store.
func RunWithPostgres(run func() int, into **Postgres) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	s, err := Start(ctx, Options{SkipClickHouse: true, SkipKafka: true})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start Postgres:", err)
		return 1
	}
	defer s.Stop()
	*into = s.Postgres
	return run()
}
