// Package cluster runs Loom as a deployment runs it: separate loomd processes, built
// from this tree, one per role replica, over one Postgres, one ClickHouse and kfake on
// loopback. Processes are killed, restarted and stopped with signals, as an
// orchestrator would. Tests run one at a time.
package cluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/devstack"
	"github.com/loomplane/loom/tests/testenv"
)

var (
	env   *testenv.Env
	loomd string // the binary under test
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "loom-cluster-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	loomd = filepath.Join(dir, "loomd")
	// loomd builds while the stores start.
	built := make(chan error, 1)
	go func() { built <- build(loomd) }()
	// The stores start empty: the first processes migrate them, concurrently.
	code := testenv.Run(m, testenv.Options{Unmigrated: true}, &env, func(context.Context, *testenv.Env) error { return <-built })
	os.RemoveAll(dir)
	os.Exit(code)
}

// build compiles loomd from this tree once for the package.
func build(out string) error {
	return testenv.GoBuild(context.Background(), "github.com/loomplane/loom/cmd/loomd", out)
}

// proc is one loomd process: its roles, its HTTP port and its log.
type proc struct {
	name  string
	roles string
	port  int
	extra map[string]string

	cmd    *exec.Cmd
	starts int // how many times start has launched it
	exited chan struct{}
	err    error // Wait's result, once exited is closed
	log    string
}

// baseEnv is the environment every process shares: the stores, and timings short
// enough for a test (a dead projector's partitions move after 6 s, not 45).
func baseEnv() map[string]string {
	c := env.Config(nil)
	return map[string]string{
		"LOOM_PG_DSN":                       c.PG.DSN,
		"LOOM_CH_ADDR":                      strings.Join(c.ClickHouse.Addr, ","),
		"LOOM_KAFKA_BROKERS":                strings.Join(c.Kafka.Brokers, ","),
		"LOOM_KEK":                          c.Keys.KEK,
		"LOOM_TOPIC":                        c.Pipeline.Topic,
		"LOOM_TOPIC_PARTITIONS":             "4",
		"LOOM_PG_DURABILITY":                string(config.DurabilityLocal),
		"LOOM_PG_POOL_MIN_SIZE":             "1",
		"LOOM_PG_POOL_MAX_SIZE":             "10",
		"LOOM_PG_PUBLISH_INTERVAL_MS":       "100",
		"LOOM_OUTBOX_POLL_MS":               "200",
		"LOOM_PROJECTOR_SESSION_TIMEOUT_MS": "6000",
		"LOOM_PG_PROJECTION_WAIT_MS":        "3000",
		"LOOM_PG_WRITE_DEADLINE_MS":         "5000",
		"LOOM_SHUTDOWN_GRACE_MS":            "15000",
		"LOOM_LOG_LEVEL":                    "warn",
	}
}

func newProc(t *testing.T, name, roles string, extra map[string]string) *proc {
	t.Helper()
	port, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, roles: roles, port: port, extra: extra, log: filepath.Join(t.TempDir(), name+".log")}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			if b, err := os.ReadFile(p.log); err == nil && len(b) > 0 {
				t.Logf("%s log:\n%s", p.name, tailLines(string(b), 30))
			}
		}
	})
	return p
}

func (p *proc) URL() string { return fmt.Sprintf("http://127.0.0.1:%d", p.port) }

// start launches the process; it does not wait for it to be ready.
func (p *proc) start(t *testing.T) {
	t.Helper()
	vars := baseEnv()
	vars["LOOM_ROLES"] = p.roles
	vars["LOOM_HTTP_ADDR"] = fmt.Sprintf("127.0.0.1:%d", p.port)
	for k, v := range p.extra {
		vars[k] = v
	}
	cmd := exec.Command(loomd, "serve")
	cmd.Env = os.Environ()
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(out, "--- start %s (%s) on :%d\n", p.name, p.roles, p.port)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		t.Fatalf("start %s: %v", p.name, err)
	}
	p.cmd, p.exited = cmd, make(chan struct{})
	p.starts++
	go func() { p.err = cmd.Wait(); out.Close(); close(p.exited) }()
}

// waitReady waits until the process answers /v1/health/ready with 200. A first
// start whose port another process took meanwhile moves to a new port; a restart
// keeps its port, which clients already know.
func (p *proc) waitReady(t *testing.T) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for moves := 0; ; {
		select {
		case <-p.exited:
			if moves < 3 && p.starts == 1 && p.lostPort() {
				port, err := devstack.FreePort()
				if err != nil {
					t.Fatal(err)
				}
				moves, p.port, p.starts = moves+1, port, 0
				p.start(t)
				continue
			}
			t.Fatalf("%s exited while starting (%v):\n%s", p.name, p.err, tailFile(p.log, 20))
		default:
		}
		if resp, err := client.Get(p.URL() + "/v1/health/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready within 60s:\n%s", p.name, tailFile(p.log, 20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lostPort tells whether the latest start failed to bind its port.
func (p *proc) lostPort() bool {
	b, _ := os.ReadFile(p.log)
	last := string(b)
	if i := strings.LastIndex(last, "--- start "); i >= 0 {
		last = last[i:]
	}
	return strings.Contains(last, "address already in use")
}

func (p *proc) running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill ends the process at once (SIGKILL): a crash, an OOM kill, a lost node.
func (p *proc) kill() {
	if !p.running() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// terminate asks the process to stop (SIGTERM) and returns its exit error once it has.
func (p *proc) terminate(t *testing.T, within time.Duration) error {
	t.Helper()
	if !p.running() {
		return p.err
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.err
	case <-time.After(within):
		t.Fatalf("%s did not exit within %s of SIGTERM:\n%s", p.name, within, tailFile(p.log, 20))
		return nil
	}
}

// loomdCLI runs a loomd subcommand with the shared environment and returns its stdout.
func loomdCLI(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, loomd, args...)
	cmd.Env = os.Environ()
	for k, v := range baseEnv() {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("loomd %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	return tailLines(string(b), n)
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
