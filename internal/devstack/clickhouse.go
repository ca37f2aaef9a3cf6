package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// ClickHouse is a private server with a generated config on free loopback ports.
type ClickHouse struct {
	dir string
	log io.Writer

	cmd      *exec.Cmd
	exited   <-chan struct{}
	TCPPort  int // native protocol: clickhouse-go and clickhouse-client
	HTTPPort int
}

// Addr is the native-protocol address.
func (c *ClickHouse) Addr() string { return fmt.Sprintf("127.0.0.1:%d", c.TCPPort) }

// PID is the server's process id (0 before Start).
func (c *ClickHouse) PID() int {
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// DataDir is the server's data path (<path>): every table's parts, metadata and
// mutation files.
func (c *ClickHouse) DataDir() string { return filepath.Join(c.dir, "data") }

// Client returns a clickhouse-client command line for the server.
func (c *ClickHouse) Client() string {
	return fmt.Sprintf("clickhouse-client --host 127.0.0.1 --port %d", c.TCPPort)
}

// findClickHouse returns the server command: Debian 12's clickhouse-server, or the
// single `clickhouse` binary of newer packages.
func findClickHouse() ([]string, error) {
	if b := os.Getenv("LOOM_CH_BIN"); b != "" {
		return strings.Fields(b), nil
	}
	for _, name := range []string{"clickhouse-server", "/usr/sbin/clickhouse-server", "/usr/bin/clickhouse-server"} {
		if p, err := exec.LookPath(name); err == nil {
			return []string{p}, nil
		}
	}
	if p, err := exec.LookPath("clickhouse"); err == nil {
		return []string{p, "server"}, nil
	}
	return nil, errors.New("no ClickHouse server found: install the Debian package clickhouse-server (make deps), or set LOOM_CH_BIN")
}

var chConfig = template.Must(template.New("config").Parse(`<?xml version="1.0"?>
<yandex>
  <logger>
    <level>warning</level>
    <log>{{.Dir}}/log/server.log</log>
    <errorlog>{{.Dir}}/log/error.log</errorlog>
    <size>20M</size>
    <count>2</count>
  </logger>
  <listen_host>127.0.0.1</listen_host>
  <tcp_port>{{.TCPPort}}</tcp_port>
  <http_port>{{.HTTPPort}}</http_port>
  <interserver_http_port>{{.InterPort}}</interserver_http_port>
  <path>{{.Dir}}/data/</path>
  <tmp_path>{{.Dir}}/tmp/</tmp_path>
  <user_files_path>{{.Dir}}/user_files/</user_files_path>
  <format_schema_path>{{.Dir}}/format_schemas/</format_schema_path>
  <users_config>{{.Dir}}/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
  <mark_cache_size>268435456</mark_cache_size>
  <max_concurrent_queries>100</max_concurrent_queries>
  <!-- An erasure's mutations rewrite the parts that held the scope; the old parts stay
       on disk until old_parts_lifetime (480 s by default) after nothing reads them, and
       are removed on the next cleanup (cleanup_delay_period). docs/architecture.md,
       "Erasure at rest", says what a production server sets. -->
  <merge_tree>
    <old_parts_lifetime>1</old_parts_lifetime>
    <cleanup_delay_period>1</cleanup_delay_period>
  </merge_tree>
  <!-- The query log a packaged server keeps (with log_queries on in the profile, as
       recent servers default): Loom's connections turn it off for their statements
       (internal/ch), whose text holds the arguments the driver binds into it. -->
  <query_log>
    <database>system</database>
    <table>query_log</table>
    <flush_interval_milliseconds>1000</flush_interval_milliseconds>
  </query_log>
</yandex>
`))

const chUsers = `<?xml version="1.0"?>
<yandex>
  <profiles>
    <default>
      <max_memory_usage>4000000000</max_memory_usage>
      <!-- one large part is read by one thread unless this is lowered -->
      <merge_tree_min_rows_for_concurrent_read>8192</merge_tree_min_rows_for_concurrent_read>
      <log_queries>1</log_queries>
    </default>
  </profiles>
  <users>
    <default>
      <password></password>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
  </users>
  <quotas><default></default></quotas>
</yandex>
`

// Start writes the config and starts the server, waiting until it answers.
func (c *ClickHouse) Start(ctx context.Context) error {
	bin, err := findClickHouse()
	if err != nil {
		return err
	}
	for _, d := range []string{"data", "tmp", "user_files", "format_schemas", "log"} {
		if err := os.MkdirAll(filepath.Join(c.dir, d), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	c.killLeftover()
	ports, err := stickyPorts(filepath.Join(c.dir, "ports"), 3)
	if err != nil {
		return err
	}
	c.TCPPort, c.HTTPPort = ports[0], ports[1]
	cfgPath := filepath.Join(c.dir, "config.xml")
	f, err := os.Create(cfgPath)
	if err != nil {
		return fmt.Errorf("write ClickHouse config: %w", err)
	}
	err = chConfig.Execute(f, map[string]any{"Dir": c.dir, "TCPPort": ports[0], "HTTPPort": ports[1], "InterPort": ports[2]})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write ClickHouse config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(c.dir, "users.xml"), []byte(chUsers), 0o644); err != nil {
		return fmt.Errorf("write ClickHouse users: %w", err)
	}
	logf(c.log, "starting ClickHouse (%s) on 127.0.0.1:%d", bin[0], c.TCPPort)
	args := append(bin[1:], "--config-file="+cfgPath)
	cmd := exec.Command(bin[0], args...)
	cmd.Dir = c.dir
	// Its own process group: Ctrl-C in the terminal reaches loomd, which stops the
	// server in order, instead of reaching the server directly.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := os.OpenFile(filepath.Join(c.dir, "log", "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open ClickHouse stdout log: %w", err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	// SIGTERM, its orderly shutdown, when loomd dies (startTied).
	exited, err := startTied(cmd, syscall.SIGTERM, func() { out.Close() })
	if err != nil {
		out.Close()
		return fmt.Errorf("start ClickHouse: %w", err)
	}
	c.cmd, c.exited = cmd, exited
	if err := c.waitReady(ctx, 90*time.Second); err != nil {
		c.Stop()
		return err
	}
	return nil
}

func (c *ClickHouse) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if err := chPing(ctx, c.Addr()); err == nil {
			return nil
		}
		select {
		case <-c.exited:
			return fmt.Errorf("ClickHouse exited during start:\n%s\n%s", tail(filepath.Join(c.dir, "log", "stdout.log"), 10), tail(filepath.Join(c.dir, "log", "error.log"), 20))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ClickHouse did not answer on %s within %s:\n%s", c.Addr(), limit, tail(filepath.Join(c.dir, "log", "error.log"), 20))
		}
	}
}

// chPing asks the server for SELECT 1: a bare TCP connect succeeds before the
// server is ready to serve queries.
func chPing(ctx context.Context, addr string) error {
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, DialTimeout: time.Second})
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return conn.Ping(ctx)
}

// killLeftover stops a server a killed `loomd dev` left running over this data
// directory (one from before servers died with their parent): ClickHouse records its
// pid in <path>/status and refuses a second server.
func (c *ClickHouse) killLeftover() {
	b, err := os.ReadFile(filepath.Join(c.dir, "data", "status"))
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || f[0] != "PID:" {
			continue
		}
		pid, err := strconv.Atoi(f[1])
		if err != nil || pid <= 1 {
			return
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if !strings.Contains(string(cmdline), filepath.Join(c.dir, "config.xml")) {
			return
		}
		logf(c.log, "stopping a ClickHouse left running (pid %d)", pid)
		syscall.Kill(pid, syscall.SIGTERM)
		for i := 0; i < 300; i++ {
			if syscall.Kill(pid, 0) != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// gone reports whether the server was never started or has exited.
func (c *ClickHouse) gone() bool {
	if c.cmd == nil || c.cmd.Process == nil {
		return true
	}
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// kill ends the server's process group at once and waits for it to exit: for a
// server whose data is thrown away.
func (c *ClickHouse) kill() error {
	if c.gone() {
		return nil
	}
	if err := syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		c.cmd.Process.Kill()
	}
	<-c.exited
	return nil
}

// Stop terminates the server and waits for it to exit.
func (c *ClickHouse) Stop() error {
	if c.gone() {
		return nil
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
		return nil
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-c.exited
		return errors.New("ClickHouse did not stop within 30s of SIGTERM; killed")
	}
}
