package faults

import (
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/devstack"
	"github.com/loomplane/loom/tests/testenv"
)

// Two `loomd serve --roles relay` processes: one publishes, the other stands by. When
// the active one is killed (SIGKILL: its lock session dies with it) the standby takes
// over within a few seconds; when that one is stopped (SIGTERM) a third takes over.
// Writes never stop, and every namespace's stream ends complete and in order.
func TestRelayStandbyTakesOverWhenTheActiveOneDies(t *testing.T) {
	c := client(t, nil)
	pool := env.PG(t)
	spaces := []string{testenv.Unique(t, "takeover-a"), testenv.Unique(t, "takeover-b"), testenv.Unique(t, "takeover-c")}
	c.AppendOnly(t, spaces...)
	bin := buildLoomd(t)

	first := startRelayProcess(t, bin)
	first.waitActive(t, 15*time.Second)
	second := startRelayProcess(t, bin)
	second.waitUp(t)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, ns := range spaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				c.Set(t, ns, fmt.Sprintf("k%02d", i%10), fmt.Sprintf("written during the takeover, number %d", i))
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	published := func() int64 {
		return testenv.Int(t, pool, `SELECT coalesce(sum(generation), 0) FROM loom.scope_generations WHERE org = $1 AND scope = ANY($2)`, org, spaces) -
			testenv.Int(t, pool, `SELECT count(*) FROM loom.outbox WHERE org = $1 AND namespace = ANY($2)`, org, spaces)
	}
	testenv.Eventually(t, 20*time.Second, "the first relay to publish", func() bool { return published() >= 30 })

	if second.active(t) {
		t.Fatal("both relays are active")
	}
	killed := time.Now()
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	second.waitActive(t, 15*time.Second)
	t.Logf("the standby took over %s after the active relay was killed", time.Since(killed).Round(10*time.Millisecond))

	third := startRelayProcess(t, bin)
	third.waitUp(t)
	before := published()
	testenv.Eventually(t, 20*time.Second, "the second relay to publish", func() bool { return published() >= before+30 })
	stopped := time.Now()
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	third.waitActive(t, 15*time.Second)
	t.Logf("the standby took over %s after the active relay was stopped", time.Since(stopped).Round(10*time.Millisecond))
	before = published()
	testenv.Eventually(t, 20*time.Second, "the third relay to publish", func() bool { return published() >= before+30 })

	close(stop)
	wg.Wait()
	testenv.Eventually(t, 30*time.Second, "the outbox to drain", func() bool {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.outbox WHERE org = $1 AND namespace = ANY($2)`, org, spaces) == 0
	})
	records := env.TopicRecords(t)
	for _, ns := range spaces {
		testenv.Stream(t, records, org, ns, testenv.Generation(t, pool, org, ns))
	}
}

func buildLoomd(t *testing.T) string {
	return testenv.Build(t, "github.com/loomplane/loom/cmd/loomd")
}

// relayProcess is `loomd serve --roles api,relay`: the api role only serves /metrics,
// which tells whether this process holds the relay lock.
type relayProcess struct {
	cmd *exec.Cmd
	url string
	out strings.Builder
}

func startRelayProcess(t *testing.T, bin string) *relayProcess {
	t.Helper()
	port, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	p := &relayProcess{url: "http://" + addr}
	p.cmd = exec.Command(bin, "serve", "--roles", "api,relay", "--addr", addr)
	p.cmd.Env = env.LoomdEnv("LOOM_OUTBOX_POLL_MS=200", "LOOM_LOG_LEVEL=warn")
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		p.cmd.Wait()
		if t.Failed() {
			t.Logf("loomd at %s said:\n%s", addr, p.out.String())
		}
	})
	return p
}

// active reads loom_relay_active from the process's /metrics.
func (p *relayProcess) active(t *testing.T) bool {
	t.Helper()
	return strings.Contains(metricsText(t, p.url), "\nloom_relay_active 1\n")
}

func (p *relayProcess) waitUp(t *testing.T) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "loomd at "+p.url+" to answer", func() bool {
		resp, err := http.Get(p.url + "/v1/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func (p *relayProcess) waitActive(t *testing.T, limit time.Duration) {
	t.Helper()
	p.waitUp(t)
	testenv.Eventually(t, limit, "loomd at "+p.url+" to hold the relay lock", func() bool { return p.active(t) })
}
