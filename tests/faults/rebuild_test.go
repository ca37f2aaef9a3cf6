package faults

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	typed "github.com/loomplane/loom/client"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/projector"
	"github.com/loomplane/loom/relay"
	"github.com/loomplane/loom/tests/testenv"
)

// `loomd projector rebuild` builds a fresh generation of the projection tables from
// the topic beside the serving ones, under its own consumer group, while searches keep
// answering from the serving tables and a writer keeps writing. Killed half-way, it
// resumes its generation when run again; caught up, it switches the query side in one
// rename: the serving tables end identical to before for the namespaces nobody wrote,
// equal to the journal for the one being written, and the old generation is kept
// until dropped on request. A rebuild can also be abandoned, leaving nothing behind.
func TestRebuildBuildsBesideTheServingTablesAndSwitches(t *testing.T) {
	p := projection(t)
	n, url, stopNode := env.Serve(t, []string{"api", "projector"}, func(c *config.Config) { c.Pipeline.Projection = p })
	defer stopNode()
	admin := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	writer := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleWriter}))
	pool, conn := env.PG(t), env.CH(t)
	env.Relay(t, relay.Faults{})

	quiet := []string{testenv.Unique(t, "rebuild-a"), testenv.Unique(t, "rebuild-b")}
	busy := testenv.Unique(t, "rebuild-busy")
	admin.AppendOnly(t, append([]string{busy}, quiet...)...)
	for _, ns := range quiet {
		for i := 0; i < 40; i++ {
			writer.Set(t, ns, fmt.Sprintf("k%02d", i%15), fmt.Sprintf("rebuilt fact %d of %s", i%15, ns))
		}
	}
	caughtUp := func(namespaces ...string) bool {
		for _, ns := range namespaces {
			if testenv.Watermark(t, pool, p, org, ns) < testenv.Generation(t, pool, org, ns) {
				return false
			}
		}
		return true
	}
	testenv.Eventually(t, 30*time.Second, "the serving projection to catch up", func() bool { return caughtUp(quiet...) })
	before := testenv.TableSums(t, conn, org, quiet)
	start, err := projector.ReadTablesState(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	gen := start.Next

	// A writer writes throughout; its answers are counted, its rows checked at the end.
	ctx, stopWriting := context.WithCancel(context.Background())
	defer stopWriting()
	var wrote atomic.Int64
	var writing sync.WaitGroup
	writing.Add(1)
	busyWriter := writer.Typed(t)
	go func() {
		defer writing.Done()
		for i := 0; ctx.Err() == nil; i++ {
			if _, err := busyWriter.Set(ctx, busy, fmt.Sprintf("b%03d", i%50), typed.SetRequest{Value: fmt.Sprintf("busy fact %d", i)}); err == nil {
				wrote.Add(1)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	// Searches answer from the serving tables throughout: every quiet row is found.
	searched := 0
	search := func() {
		t.Helper()
		ns, k := quiet[searched%2], searched%15
		found, err := admin.Typed(t).Search(context.Background(), ns, typed.SearchRequest{Query: fmt.Sprintf("rebuilt fact %d of %s", k, ns), TopK: 3})
		searched++
		if testenv.Retryable503(err, typed.CodeProjectionBehind) {
			return
		}
		if err != nil || !slices.ContainsFunc(found.Hits, func(h typed.Hit) bool { return h.MemoryKey == fmt.Sprintf("k%02d", k) }) {
			t.Fatalf("search during the rebuild for k%02d of %s: %v %+v", k, ns, err, found)
		}
	}

	bin := buildLoomd(t)
	// The resumed build's consumer waits for the killed one's group session to end:
	// kfake's shortest, rather than the 45 s default.
	rebuildEnv := env.LoomdEnv("LOOM_PROJECTION="+p, "LOOM_PROJECTOR_SESSION_TIMEOUT_MS=6000")

	// Killed once it has begun, the rebuild leaves its generation recorded, half-built.
	first := startRebuild(t, bin, rebuildEnv)
	first.waitFor(t, "building", 60*time.Second)
	first.kill()
	if s, _ := projector.ReadTablesState(context.Background(), pool); s.Building != gen || s.BuildingFor != p || s.Serving != start.Serving {
		t.Fatalf("after a killed rebuild the generations are %+v, want generation %d building for %s", s, gen, p)
	}
	search()

	// Run again, it resumes that generation and switches.
	second := startRebuild(t, bin, rebuildEnv)
	for !second.exited() {
		search()
		time.Sleep(50 * time.Millisecond)
	}
	out, err := second.result()
	if err != nil {
		t.Fatalf("loomd projector rebuild: %v\n%s", err, out)
	}
	t.Logf("rebuild (searched %d times meanwhile):\n%s", searched, out)
	if !strings.Contains(out, fmt.Sprintf("generation %d: building", gen)) || !strings.Contains(out, fmt.Sprintf("generation %d serves", gen)) {
		t.Fatalf("the resumed rebuild did not build and switch generation %d:\n%s", gen, out)
	}
	after, err := projector.ReadTablesState(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	if after.Serving != gen || after.Building != 0 || fmt.Sprint(after.Retired) != fmt.Sprint(append(start.Retired, start.Serving)) {
		t.Fatalf("generations after the switch: %+v, want generation %d serving and %d kept", after, gen, start.Serving)
	}
	if testenv.Int(t, pool, `SELECT count(*) FROM loom.projection_watermarks WHERE projection = $1`, projector.BuildName(p, gen)) != 0 {
		t.Fatal("the building projection's watermarks outlived the switch")
	}
	kept := fmt.Sprintf("memory__g%d", start.Serving)
	if testenv.CHStrings(t, conn, `SELECT name FROM system.tables WHERE database = 'loom' AND name = ?`, kept) == nil {
		t.Fatalf("the old generation was not kept as loom.%s", kept)
	}

	// The switched tables hold what the old ones held, and keep following the topic.
	stopWriting()
	writing.Wait()
	if wrote.Load() < 10 {
		t.Fatalf("only %d writes answered during the rebuild", wrote.Load())
	}
	testenv.Eventually(t, 60*time.Second, "the serving projection to catch up after the switch", func() bool { return caughtUp(busy) })
	if got := testenv.TableSums(t, conn, org, quiet); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("the rebuilt tables differ from the ones they replaced:\n before %v\n after  %v", before, got)
	}
	for _, ns := range append([]string{busy}, quiet...) {
		testenv.CheckProjection(t, pool, conn, p, org, ns)
	}
	search()

	if out, err := loomd(bin, "projector", "rebuild", "--status"); err != nil || !strings.Contains(out, "no rebuild under way") {
		t.Fatalf("loomd projector rebuild --status: %v\n%s", err, out)
	}
	// A DROP that outlasts the connection's read timeout (on 18.16 it waits for the
	// statements reading the table) is sent again until it is done.
	reading := holdReading(t, conn, kept)
	cmd := exec.Command(bin, "projector", "rebuild", "--drop-retired")
	cmd.Env = append(rebuildEnv, "LOOM_CH_READ_TIMEOUT_MS=1000")
	out, err = combined(cmd)
	if err != nil || !strings.Contains(out, fmt.Sprint(start.Serving)) {
		t.Fatalf("loomd projector rebuild --drop-retired: %v\n%s", err, out)
	}
	t.Logf("loomd projector rebuild --drop-retired, a reader holding loom.%s:\n%s", kept, out)
	select {
	case <-reading: // the DROP waited for the reader, four times the read timeout
		if !strings.Contains(out, "sending it again") {
			t.Fatalf("the DROP outlasted the read timeout, yet was not sent again:\n%s", out)
		}
	default: // a server that drops a table under its readers
	}
	if names := testenv.CHStrings(t, conn, `SELECT name FROM system.tables WHERE database = 'loom' AND match(name, '__g[0-9]+$')`); len(names) > 0 {
		t.Fatalf("tables of dropped generations remain: %v", names)
	}

	// An abandoned rebuild leaves no tables, watermarks or record behind.
	third := startRebuild(t, bin, rebuildEnv)
	third.waitFor(t, "building", 60*time.Second)
	third.kill()
	cmd = exec.Command(bin, "projector", "rebuild", "--abandon")
	cmd.Env = rebuildEnv
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), fmt.Sprintf("abandoned generation %d", gen+1)) {
		t.Fatalf("loomd projector rebuild --abandon: %v\n%s", err, out)
	}
	if s, _ := projector.ReadTablesState(context.Background(), pool); s.Building != 0 || s.Serving != gen {
		t.Fatalf("generations after abandoning: %+v", s)
	}
	if names := testenv.CHStrings(t, conn, `SELECT name FROM system.tables WHERE database = 'loom' AND match(name, '__g[0-9]+$')`); len(names) > 0 {
		t.Fatalf("tables of the abandoned generation remain: %v", names)
	}
	if testenv.Int(t, pool, `SELECT count(*) FROM loom.projection_watermarks WHERE projection = $1`, projector.BuildName(p, gen+1)) != 0 {
		t.Fatal("the abandoned projection's watermarks remain")
	}
}

// rebuildRun is `loomd projector rebuild` running, its output collected.
type rebuildRun struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error
}

func startRebuild(t *testing.T, bin string, environ []string) *rebuildRun {
	t.Helper()
	r := &rebuildRun{cmd: exec.Command(bin, "projector", "rebuild"), done: make(chan struct{})}
	r.cmd.Env = environ
	r.cmd.Stdout, r.cmd.Stderr = r, r
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(r.kill)
	return r
}

// Write collects the process's output.
func (r *rebuildRun) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.Write(b)
}

// kill kills the process (SIGKILL) and waits for it.
func (r *rebuildRun) kill() {
	r.cmd.Process.Kill()
	<-r.done
}

func (r *rebuildRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

func (r *rebuildRun) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

func (r *rebuildRun) result() (string, error) {
	<-r.done
	return r.output(), r.err
}

// waitFor waits until the output holds text.
func (r *rebuildRun) waitFor(t *testing.T, text string, limit time.Duration) {
	t.Helper()
	testenv.Eventually(t, limit, "loomd projector rebuild to print "+text, func() bool {
		if r.exited() && !strings.Contains(r.output(), text) {
			t.Fatalf("loomd projector rebuild exited (%v) before printing %q:\n%s", r.err, text, r.output())
		}
		return strings.Contains(r.output(), text)
	})
}

// holdReading starts a statement that reads loom.<table> for about four seconds and
// returns once the server runs it; the channel is closed when the statement ends.
func holdReading(t *testing.T, conn *ch.Conn, table string) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var n uint64
		_ = conn.QueryRow(context.Background(), `SELECT count() FROM (SELECT sleepEachRow(0.5) FROM loom.`+table+
			` LIMIT 8) SETTINGS max_block_size = 1`).Scan(&n)
	}()
	testenv.Eventually(t, 10*time.Second, "the slow reader to start", func() bool {
		return testenv.CHStrings(t, conn, `SELECT query FROM system.processes WHERE query LIKE '%sleepEachRow%' AND query NOT LIKE '%system.processes%'`) != nil
	})
	return done
}

func combined(cmd *exec.Cmd) (string, error) {
	out, err := cmd.CombinedOutput()
	return string(out), err
}
