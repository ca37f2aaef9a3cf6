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
	"time"

	"github.com/jackc/pgx/v5"
)

// Database is the database Loom uses in the private cluster; User owns it.
const (
	Database = "loom"
	User     = "loom"
)

// Postgres is a private cluster run from the installed server binaries.
type Postgres struct {
	dir     string
	durable bool
	log     io.Writer

	bin  string
	as   *runAs
	Port int
}

// DSN is the connection string of the loom database.
func (p *Postgres) DSN() string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", User, p.Port, Database)
}

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

// Start initialises the cluster on first use and starts it on a free port.
func (p *Postgres) Start(ctx context.Context) error {
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
		logf(p.log, "initialising a Postgres cluster in %s", p.data())
		args := []string{"-D", p.data(), "-U", User, "--auth=trust", "-E", "UTF8", "--no-locale"}
		if !p.durable {
			args = append(args, "--no-sync")
		}
		if out, err := p.as.command(filepath.Join(bin, "initdb"), args...).CombinedOutput(); err != nil {
			return fmt.Errorf("initdb %s: %w\n%s", p.data(), err, out)
		}
	}
	// A server left running by a killed `loomd dev` holds the data directory.
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
	opts := []string{
		"-p " + strconv.Itoa(p.Port),
		"-c listen_addresses=127.0.0.1",
		"-c unix_socket_directories=''",
		"-c max_connections=200",
		"-c shared_buffers=128MB",
	}
	if !p.durable {
		opts = append(opts, "-c fsync=off", "-c full_page_writes=off")
	}
	logf(p.log, "starting Postgres (%s) on 127.0.0.1:%d", bin, p.Port)
	cmd := p.as.command(filepath.Join(bin, "pg_ctl"), "-D", p.data(), "-l", filepath.Join(p.dir, "server.log"),
		"-o", strings.Join(opts, " "), "-w", "-t", "60", "start")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("start Postgres: %w\n%s\n%s", err, out, tail(filepath.Join(p.dir, "server.log"), 20))
	}
	return p.createDatabase(ctx)
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
func (p *Postgres) Stop() error {
	if p.as == nil {
		return nil
	}
	if !p.running() {
		return nil
	}
	out, err := p.as.command(filepath.Join(p.bin, "pg_ctl"), "-D", p.data(), "-m", "fast", "-w", "-t", "60", "stop").CombinedOutput()
	if err != nil {
		return fmt.Errorf("stop Postgres: %w\n%s", err, out)
	}
	return nil
}

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
