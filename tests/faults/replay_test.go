package faults

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/projector"
	"github.com/loomplane/loom/relay"
	"github.com/loomplane/loom/tests/testenv"
)

// A reset of the projection's group to earliest replays the whole topic: the tables
// end identical to before (every column of every FINAL row), the watermarks never move
// back, and searches answer throughout. The endpoint pauses the process's own
// projector for the reset; `loomd projector reset` prints its plan, changes nothing
// without --execute, and refuses while the group has live members.
func TestResetToEarliestReplaysIntoIdenticalTables(t *testing.T) {
	p := projection(t)
	n, url, stopNode := env.Serve(t, []string{"api", "projector"}, func(c *config.Config) { c.Pipeline.Projection = p })
	admin := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	operator := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Role: auth.RoleOperator}))
	writer := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleWriter}))
	pool, conn := env.PG(t), env.CH(t)
	env.Relay(t, relay.Faults{})
	group, topic := projector.Group(p), env.Config(nil).Pipeline.Topic
	spaces := []string{testenv.Unique(t, "replay-a"), testenv.Unique(t, "replay-b"), testenv.Unique(t, "replay-c")}
	admin.AppendOnly(t, spaces...)
	const perSpace = 60
	var wg sync.WaitGroup
	for _, ns := range spaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perSpace; i++ {
				writer.Set(t, ns, fmt.Sprintf("k%02d", i%20), fmt.Sprintf("replayed fact %d of %s", i, ns))
			}
		}()
	}
	wg.Wait()
	for _, ns := range spaces {
		if r := admin.Search(t, ns, "replayed fact", 3); r.Status != http.StatusOK {
			t.Fatalf("search before the reset: %d %s", r.Status, r.Body)
		}
	}
	testenv.Eventually(t, 30*time.Second, "the projection to commit its offsets", func() bool { return env.GroupCaughtUp(t, group, topic) })
	before := testenv.TableSums(t, conn, org, spaces)

	resetPath := "/v1/admin/projections/" + p + ":reset"
	if r := writer.Do(t, http.MethodPost, resetPath, []byte(`{"to": "earliest", "execute": true}`)); r.Status != http.StatusForbidden || r.ErrorCode() != "PERMISSION_DENIED" {
		t.Fatalf("reset with a writer token: %d %s", r.Status, r.Body)
	}
	for _, body := range []string{`{"to": "yesterday"}`, `{"execute": true}`, `{"to": "earliest", "now": true}`} {
		if r := operator.Do(t, http.MethodPost, resetPath, []byte(body)); r.Status != http.StatusUnprocessableEntity || r.ErrorCode() != "VALIDATION_FAILED" {
			t.Fatalf("reset with %s: %d %s", body, r.Status, r.Body)
		}
	}

	// A dry run plans and changes nothing.
	r := operator.Do(t, http.MethodPost, resetPath, []byte(`{"to": "earliest"}`))
	var plan struct {
		projector.ResetPlan
		Executed   bool `json:"executed"`
		PausedHere bool `json:"paused_here"`
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &plan) != nil || plan.Executed || plan.Group != group || len(plan.Members) != 1 {
		t.Fatalf("dry run: %d %s", r.Status, r.Body)
	}
	moved := 0
	for _, m := range plan.Partitions {
		if m.New != 0 {
			t.Fatalf("earliest is offset %d on partition %d, want 0", m.New, m.Partition)
		}
		if m.Current > 0 {
			moved++
		}
	}
	if moved == 0 || !env.GroupCaughtUp(t, group, topic) {
		t.Fatalf("dry run moved offsets or planned nothing: %s", r.Body)
	}

	// The command line refuses while this process's projector is in the group.
	bin := buildLoomd(t)
	if out, err := loomd(bin, "projector", "reset", "--group", group, "--to", "earliest", "--execute"); err == nil || !strings.Contains(out, "live members") {
		t.Fatalf("loomd projector reset with a live member: %v\n%s", err, out)
	}

	dupes := metricValue(t, url, `loom_projector_duplicates_total{projection="`+p+`"}`)
	start := time.Now()
	r = operator.Do(t, http.MethodPost, resetPath, []byte(`{"to": "earliest", "execute": true}`))
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &plan) != nil || !plan.Executed || !plan.PausedHere {
		t.Fatalf("reset: %d %s", r.Status, r.Body)
	}
	testenv.Eventually(t, 60*time.Second, "the projection to replay the topic", func() bool { return env.GroupCaughtUp(t, group, topic) })
	took := time.Since(start)
	var records int64
	for _, m := range plan.Partitions {
		records += max(m.Current, 0)
	}
	replayed := metricValue(t, url, `loom_projector_duplicates_total{projection="`+p+`"}`) - dupes
	t.Logf("replayed %d records (%.0f duplicates counted) in %s: %.0f records/s", records, replayed, took.Round(time.Millisecond), float64(records)/took.Seconds())
	if replayed < float64(len(spaces)*perSpace) {
		t.Fatalf("the projector saw %.0f records again, want at least the %d revisions", replayed, len(spaces)*perSpace)
	}
	if after := testenv.TableSums(t, conn, org, spaces); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("tables changed over the replay:\n before %v\n after  %v", before, after)
	}
	for _, m := range plan.Partitions {
		series := fmt.Sprintf(`loom_projector_lag_records{partition="%d",projection="%s"}`, m.Partition, p)
		if m.Current > 0 && !strings.Contains(metricsText(t, url), "\n"+series+" 0\n") {
			t.Fatalf("/metrics lacks %s 0 once the replay caught up", series)
		}
	}
	for _, ns := range spaces {
		testenv.CheckProjection(t, pool, conn, p, org, ns)
		if r := admin.Search(t, ns, "replayed fact", 3); r.Status != http.StatusOK {
			t.Fatalf("search after the reset: %d %s", r.Status, r.Body)
		}
	}

	// With the projector gone, the command line plans, and moves offsets only when told.
	stopNode()
	out, err := loomd(bin, "projector", "reset", "--group", group, "--to", "earliest")
	if err != nil || !strings.Contains(out, "PARTITION") || !strings.Contains(out, "dry run") || !env.GroupCaughtUp(t, group, topic) {
		t.Fatalf("loomd projector reset (dry run): %v\n%s", err, out)
	}
	if out, err := loomd(bin, "projector", "reset", "--group", group, "--to", "earliest", "--execute"); err != nil || !strings.Contains(out, "offsets moved") {
		t.Fatalf("loomd projector reset --execute: %v\n%s", err, out)
	}
	if env.GroupCaughtUp(t, group, topic) {
		t.Fatal("the executed reset left the group's offsets at the end")
	}
}

// loomd runs the binary against the test stores and returns its combined output.
func loomd(bin string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env.LoomdEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// metricValue reads one sample from /metrics; 0 when it is not exported yet.
func metricValue(t testing.TB, url, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`\n` + regexp.QuoteMeta(series) + ` (\S+)\n`).FindStringSubmatch(metricsText(t, url))
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("metric %s = %q", series, m[1])
	}
	return v
}
