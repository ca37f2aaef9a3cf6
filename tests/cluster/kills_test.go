package cluster

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/loomplane/loom/tests/testenv"
)

const kills = 20

// The only projector process is killed (SIGKILL) 20 times while two writers run, each
// time at a random point after it has applied records again: mid-batch, between its
// ClickHouse inserts and its watermarks, between its watermarks and its offset commit,
// or idle. Each restart rejoins the group as a new member, resumes from the committed
// offsets and meets again what the dead one wrote and did not commit. Afterwards
// ClickHouse equals the Postgres journal and heads.
func TestProjectorKilled20TimesLeavesClickHouseEqualToPostgres(t *testing.T) {
	// The dead member holds the partitions until its session times out, and the only
	// other member is its successor: a 1.5 s session (kfake's floor is 6 s unless
	// lowered) keeps each of the 20 rejoins from waiting 6 s.
	shortGroupSessions(t, 1000)
	projector := newProc(t, "projector", "projector", map[string]string{"LOOM_PROJECTOR_SESSION_TIMEOUT_MS": "1500"})
	relay := newProc(t, "relay", "relay", nil)
	// What each successor met at or below the watermark when it came to work: records
	// its predecessor had written and not committed.
	redelivered := 0.0
	killRepeatedly(t, projector, relay, projector, func() bool {
		if metric(projector, `loom_projector_records_total{projection="main"}`) <= 0 {
			return false
		}
		redelivered += max(0, metric(projector, `loom_projector_duplicates_total{projection="main"}`))
		return true
	})
	t.Logf("the restarted projectors met %.0f records again that their predecessors had written", redelivered)
}

// The only relay process is killed (SIGKILL) 20 times while two writers run, each time
// at a random point after it has taken the relay lock and published again: mid-round,
// between Kafka's acknowledgement and the outbox delete (so its successor publishes
// those records again), or idle. The lock dies with the killed process's Postgres
// session, so the restart takes it at once. Afterwards ClickHouse equals the Postgres
// journal and heads.
func TestRelayKilled20TimesLeavesClickHouseEqualToPostgres(t *testing.T) {
	projector := newProc(t, "projector", "projector", nil)
	relay := newProc(t, "relay", "relay", nil)
	namespaces := killRepeatedly(t, projector, relay, relay, func() bool {
		return metric(relay, "loom_relay_active") == 1 && metric(relay, "loom_relay_published_total") > 0
	})
	again := 0
	for _, ns := range namespaces {
		for _, n := range env.SeqCopies(t, org, ns) {
			again += n - 1
		}
	}
	t.Logf("%d records were published again by the relay that followed a kill", again)
}

// killRepeatedly runs a command and query process beside projector and relay, writes
// into two namespaces throughout, and kills victim (one of the two) `kills` times, each
// a random 150–1200 ms after its restarted process is at work again (working holds).
// Then it checks that ClickHouse converges on the journal, and returns the namespaces.
func killRepeatedly(t *testing.T, projector, relay, victim *proc, working func() bool) []string {
	began := time.Now()
	api := newProc(t, "command-query", "command,query", nil)
	procs := []*proc{api, projector, relay}
	for _, p := range procs {
		p.start(t)
	}
	for _, p := range procs {
		p.waitReady(t)
	}
	c := newCaller(loomdCLI(t, "token", "create", "--org", org, "--role", "admin", "--name", "kill test"))

	seed := time.Now().UnixNano()
	if s := os.Getenv("LOOM_TEST_KILL_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("LOOM_TEST_KILL_SEED: %v", err)
		}
	}
	t.Logf("kill timing seed %d (LOOM_TEST_KILL_SEED repeats it)", seed)
	rng := rand.New(rand.NewSource(seed))

	namespaces := []string{testenv.Unique(t, "a"), testenv.Unique(t, "b")}
	ctx, stopWriters := context.WithCancel(context.Background())
	defer stopWriters()
	var wg sync.WaitGroup
	book, writes := startWriters(ctx, &wg, seed, c, []*proc{api}, namespaces)

	atWork := func() { testenv.Eventually(t, 30*time.Second, victim.name+" to be at work", working) }
	atWork()
	killed := 0
	var back time.Duration // from each kill until the successor was at work
	for i := 0; i < kills; i++ {
		time.Sleep(time.Duration(150+rng.Intn(1051)) * time.Millisecond)
		at := time.Now()
		victim.kill()
		killed++
		victim.start(t)
		victim.waitReady(t)
		atWork()
		back += time.Since(at)
	}
	stopWriters()
	wg.Wait()
	t.Logf("%s killed %d times, back at work %s after each kill on average; writes %v", victim.name, killed, (back / kills).Round(time.Millisecond), writes.counts)
	if killed != kills {
		t.Fatalf("%s was killed %d times, want %d", victim.name, killed, kills)
	}
	checkTallies(t, writes)
	if writes.counts["ok"] < 50 {
		t.Fatalf("too few writes got through to test anything: %v", writes.counts)
	}
	checkConverged(t, namespaces, book)
	t.Logf("converged in %s from the start", time.Since(began).Round(time.Millisecond))
	return namespaces
}

// shortGroupSessions lowers kfake's least allowed group session timeout to ms for the
// test, so a projector may ask for a session shorter than Kafka's default floor of 6 s.
func shortGroupSessions(t *testing.T, ms int) {
	t.Helper()
	adm := env.Admin(t)
	alter := func(op kadm.IncrementalOp, value *string) {
		rs, err := adm.AlterBrokerConfigs(context.Background(), []kadm.AlterConfig{{Op: op, Name: "group.min.session.timeout.ms", Value: value}})
		if err == nil {
			for _, r := range rs {
				if r.Err != nil {
					err = fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
				}
			}
		}
		if err != nil {
			t.Fatalf("alter group.min.session.timeout.ms: %v", err)
		}
	}
	alter(kadm.SetConfig, kadm.StringPtr(strconv.Itoa(ms)))
	t.Cleanup(func() { alter(kadm.DeleteConfig, nil) })
}

// metric is the value of the sample of p's /metrics named series (its name and labels,
// as printed), or -1 when p does not answer or has no such sample.
func metric(p *proc, series string) float64 {
	text := metricsText(p.URL())
	if text == "" {
		return -1
	}
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return -1
			}
			return f
		}
	}
	return -1
}
