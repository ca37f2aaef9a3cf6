package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// The example consumer (examples/consumer), built and run as a downstream team would:
// it prints one line per event with the content fetched through the API, commits its
// offsets after handling (a restart prints only what is new), and dedupes by seq (a
// fresh group over the same state file prints nothing twice).
func TestExampleConsumerFollowsTheTopic(t *testing.T) {
	n, url := env.SharedAPI(t)
	token := env.Token(t, n, auth.NewToken{Org: "acme", Role: auth.RoleReader})
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	ns := testenv.Unique(t, "consumer")
	c.Set(t, ns, "theme", "dark mode")
	c.Set(t, ns, "theme", "light mode")
	c.Set(t, ns, "font", "a monospaced font")

	bin := testenv.Build(t, "github.com/loomplane/loom/examples/consumer")
	state := filepath.Join(t.TempDir(), "state.json")
	group := testenv.Unique(t, "group")
	id := func(seq int) string { return fmt.Sprintf("acme/%s/%d ", ns, seq) }

	run := startConsumer(t, bin, url, token, group, state)
	lines := run.waitFor(t, id(3))
	wantLine(t, lines, id(1), "memory.written", `key="theme" content=(superseded: the head is version`)
	wantLine(t, lines, id(2), "memory.revised", `key="theme" value="light mode"`)
	wantLine(t, lines, id(3), "memory.written", `key="font" value="a monospaced font"`)
	run.stop(t)

	// The same group resumes after its committed offsets.
	c.Set(t, ns, "font", "a serif font")
	run = startConsumer(t, bin, url, token, group, state)
	lines = run.waitFor(t, id(4))
	wantLine(t, lines, id(4), "memory.revised", `value="a serif font"`)
	noLine(t, lines, id(1), id(2), id(3))
	run.stop(t)

	// A new group reads the topic from the start; the saved seqs make every event it
	// already handled a duplicate.
	c.Set(t, ns, "theme", "solarized")
	run = startConsumer(t, bin, url, token, testenv.Unique(t, "group2"), state)
	lines = run.waitFor(t, id(5))
	wantLine(t, lines, id(5), "memory.revised", `value="solarized"`)
	noLine(t, lines, id(1), id(2), id(3), id(4))
	run.stop(t)
}

type consumerRun struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []string
	stderr strings.Builder
	done   chan error
}

func startConsumer(t *testing.T, bin, api, token, group, state string) *consumerRun {
	t.Helper()
	cmd := exec.Command(bin, "--brokers", strings.Join(env.Stack.Kafka.Brokers(), ","),
		"--group", group, "--state", state, "--api", api)
	cmd.Env = append(os.Environ(), "LOOM_TOKEN="+token)
	r := &consumerRun{cmd: cmd, done: make(chan error, 1)}
	cmd.Stderr = &r.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			r.mu.Lock()
			r.lines = append(r.lines, sc.Text())
			r.mu.Unlock()
		}
		r.done <- cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	return r
}

// waitFor waits until a line starting with prefix is printed and returns every line so far.
func (r *consumerRun) waitFor(t *testing.T, prefix string) []string {
	t.Helper()
	var lines []string
	testenv.Eventually(t, 30*time.Second, "the consumer to print "+prefix, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		lines = append(lines[:0], r.lines...)
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return true
			}
		}
		return false
	})
	return lines
}

// stop interrupts the consumer as Ctrl-C would and expects a clean exit.
func (r *consumerRun) stop(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("consumer exited with %v\n%s", err, r.stderr.String())
		}
	case <-ctx.Done():
		t.Fatal("consumer did not stop on SIGINT")
	}
}

func wantLine(t *testing.T, lines []string, prefix string, parts ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.HasPrefix(l, prefix) {
			continue
		}
		for _, p := range parts {
			if !strings.Contains(l, p) {
				t.Fatalf("line %q lacks %q", l, p)
			}
		}
		return
	}
	t.Fatalf("no line for %s in:\n%s", prefix, strings.Join(lines, "\n"))
}

func noLine(t *testing.T, lines []string, prefixes ...string) {
	t.Helper()
	for _, l := range lines {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				t.Fatalf("the consumer handled %s again: %q", p, l)
			}
		}
	}
}
