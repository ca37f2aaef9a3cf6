package cluster

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/devstack"
	"github.com/loomplane/loom/tests/testenv"
)

// `loomd dev` killed with SIGKILL, which it cannot catch, takes its embedded Postgres
// and ClickHouse with it: the kernel signals them as their parent dies, and they shut
// down without anyone stopping them.
func TestKilledDevTakesItsStoresWithIt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "loom")
	port, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "dev.log")
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command(loomd, "dev", "--dir", dir, "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--kafka-port", "0")
	cmd.Env = append(os.Environ(), "LOOM_LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })

	health := fmt.Sprintf("http://127.0.0.1:%d/v1/health", port)
	testenv.Eventually(t, 3*time.Minute, "loomd dev to serve", func() bool {
		select {
		case <-exited:
			t.Fatalf("loomd dev exited:\n%s", tailFile(logPath, 30))
		default:
		}
		resp, err := http.Get(health)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	stores := map[string]int{
		"Postgres":   pidFromFile(t, filepath.Join(dir, "postgres", "data", "postmaster.pid"), ""),
		"ClickHouse": pidFromFile(t, filepath.Join(dir, "clickhouse", "data", "status"), "PID:"),
	}
	for name, pid := range stores {
		if !alive(pid) {
			t.Fatalf("%s (pid %d) is not running under loomd dev", name, pid)
		}
	}
	t.Cleanup(func() { // a failed run leaves no server behind
		for _, pid := range stores {
			if alive(pid) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	for name, pid := range stores {
		testenv.Eventually(t, 90*time.Second, name+" to exit after loomd dev was killed", func() bool { return !alive(pid) })
	}
}

// pidFromFile reads a pid from a server's pid file: the first line, or the line that
// starts with prefix.
func pidFromFile(t *testing.T, path, prefix string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(strings.TrimPrefix(line, prefix)); strings.HasPrefix(line, prefix) && len(f) > 0 {
			if pid, err := strconv.Atoi(f[0]); err == nil {
				return pid
			}
		}
	}
	t.Fatalf("no pid in %s:\n%s", path, b)
	return 0
}

// alive reports whether pid runs; a zombie (exited, not yet reaped by whoever
// inherited it) does not.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
