package cluster

import (
	"context"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/tests/testenv"
)

const org = "acme"

// words make every value distinct enough that searching a value's own text ranks it
// first among thousands.
var words = strings.Fields(`amber basalt cedar delta ember fjord garnet harbor indigo juniper kestrel lagoon
	meadow nectar obsidian prairie quartz raven saffron tundra umber velvet willow xenon yarrow zephyr
	anchor beacon canyon dune estuary falcon glacier heron island jasper kelp lantern marble nimbus
	orchid pebble quiver reef sierra thistle urchin valley walnut yucca zinnia atlas bramble comet`)

func sentence(rng *rand.Rand, ns string, i int) string {
	parts := []string{fmt.Sprintf("fact %d of %s:", i, ns)}
	for j := 0; j < 8; j++ {
		parts = append(parts, words[rng.Intn(len(words))])
	}
	return strings.Join(parts, " ")
}

// acked is a write some replica answered 200.
type acked struct {
	key, value, version string
	revisable           bool
}

// ledger is what the writers know: per namespace, every write answered 200, in order.
type ledger struct {
	mu     sync.Mutex
	writes map[string][]acked
}

func (l *ledger) add(ns string, a acked) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes[ns] = append(l.writes[ns], a)
}

// pick returns an acknowledged write of ns that no later write revises, or false.
func (l *ledger) pick(rng *rand.Rand, ns string) (acked, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var fixed []acked
	for _, a := range l.writes[ns] {
		if !a.revisable {
			fixed = append(fixed, a)
		}
	}
	if len(fixed) == 0 {
		return acked{}, false
	}
	return fixed[rng.Intn(len(fixed))], true
}

type tally struct {
	mu     sync.Mutex
	counts map[string]int
	bad    []string
}

func (t *tally) count(what string) {
	t.mu.Lock()
	t.counts[what]++
	t.mu.Unlock()
}

func (t *tally) fail(format string, args ...any) {
	t.mu.Lock()
	t.bad = append(t.bad, fmt.Sprintf(format, args...))
	t.mu.Unlock()
}

// Two command, two query, two projector processes and two relays boot together over
// empty stores (they migrate and record the deployment concurrently). A writer per
// namespace and two searchers run while one process of each role is killed (SIGKILL)
// and restarted, the relay killed being the active one. Every write is answered 200 or
// a retryable 503 or not at all (its replica died); every search answers a result that
// holds the acknowledged write it looked for, or a retryable 503. Afterwards ClickHouse
// holds exactly the Postgres journal and heads, every acknowledged write among them,
// and every process stops cleanly on SIGTERM.
func TestEveryRoleReplicatedSurvivesKills(t *testing.T) {
	fleet := map[string][]*proc{}
	for _, role := range []string{"command", "query", "projector", "relay"} {
		for i := 0; i < 2; i++ {
			p := newProc(t, fmt.Sprintf("%s-%d", role, i), role, nil)
			fleet[role] = append(fleet[role], p)
			p.start(t)
		}
	}
	var all []*proc
	for _, ps := range fleet {
		for _, p := range ps {
			all = append(all, p)
		}
	}
	for _, p := range all {
		p.waitReady(t)
	}
	// Health names the deployment to the operator's token alone.
	operator := newCaller(loomdCLI(t, "token", "create", "--operator", "--name", "cluster operator"))
	var deployment string
	for _, p := range all {
		var id string
		if h, err := operator.at(p.URL()).Health(context.Background()); err == nil {
			id = h.DeploymentID
		}
		if deployment == "" {
			deployment = id
		}
		if id == "" || id != deployment {
			t.Fatalf("%s serves deployment %q, another process %q: concurrent first boots must agree", p.name, id, deployment)
		}
	}
	token := loomdCLI(t, "token", "create", "--org", org, "--role", "admin", "--name", "cluster test")
	c := newCaller(token)

	namespaces := []string{testenv.Unique(t, "a"), testenv.Unique(t, "b"), testenv.Unique(t, "c"), testenv.Unique(t, "d")}
	searches := &tally{counts: map[string]int{}}
	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	var wg sync.WaitGroup
	book, writes := startWriters(ctx, &wg, 0, c, fleet["command"], namespaces)
	for s := 0; s < 2; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			search(ctx, rand.New(rand.NewSource(int64(100+s))), c, fleet["query"], namespaces, book, searches)
		}(s)
	}

	// One process of each role is killed and restarted while the load runs.
	pause := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	for _, role := range []string{"command", "query", "projector", "relay"} {
		pause(4 * time.Second)
		victim := fleet[role][0]
		if role == "relay" {
			victim = activeRelay(t, fleet["relay"])
		}
		t.Logf("killing %s", victim.name)
		victim.kill()
		pause(2 * time.Second)
		victim.start(t)
		victim.waitReady(t)
	}
	pause(8 * time.Second)
	stopLoad()
	wg.Wait()

	checkTallies(t, writes, searches)
	t.Logf("writes: %v; searches: %v", writes.counts, searches.counts)
	if writes.counts["ok"] < 100 || searches.counts["ok"] < 20 {
		t.Fatalf("too little load got through to test anything: writes %v, searches %v", writes.counts, searches.counts)
	}

	checkConverged(t, namespaces, book)

	// Every process stops on SIGTERM, promptly and cleanly.
	var stopping sync.WaitGroup
	for _, p := range all {
		stopping.Add(1)
		go func(p *proc) {
			defer stopping.Done()
			if err := p.terminate(t, 30*time.Second); err != nil {
				t.Errorf("%s exited with %v on SIGTERM:\n%s", p.name, err, tailFile(p.log, 10))
			}
		}(p)
	}
	stopping.Wait()
}

// checkTallies fails the test now if any of the tallies recorded a wrong answer.
func checkTallies(t *testing.T, tallies ...*tally) {
	t.Helper()
	for _, tl := range tallies {
		for _, b := range tl.bad {
			t.Error(b)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// checkConverged waits for the relays to drain the outbox and the projectors to reach
// every namespace's generation, then checks that ClickHouse holds exactly the Postgres
// journal and heads of each namespace, and that every acknowledged write is in the
// journal.
func checkConverged(t *testing.T, namespaces []string, book *ledger) {
	t.Helper()
	pool, conn := env.PG(t), env.CH(t)
	testenv.Eventually(t, 90*time.Second, "the relays to drain the outbox and the projectors to catch up", func() bool {
		if testenv.Int(t, pool, `SELECT count(*) FROM loom.outbox`) > 0 {
			return false
		}
		for _, ns := range namespaces {
			if testenv.Watermark(t, pool, "main", org, ns) < testenv.Generation(t, pool, org, ns) {
				return false
			}
		}
		return true
	})
	for _, ns := range namespaces {
		testenv.CheckProjection(t, pool, conn, "main", org, ns)
		book.mu.Lock()
		for _, a := range book.writes[ns] {
			if testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND memory_key = (SELECT loom.key_ref($1, $3)) AND version = $4::bigint`,
				org, ns, a.key, a.version) != 1 {
				t.Errorf("write %s/%s answered 200 at version %s is not in the journal", ns, a.key, a.version)
			}
		}
		book.mu.Unlock()
	}
}

// startWriters starts a writer (write) per namespace in wg until ctx ends, the i-th
// seeded with seed+i, and returns the ledger and the tally they fill.
func startWriters(ctx context.Context, wg *sync.WaitGroup, seed int64, c *caller, commands []*proc, namespaces []string) (*ledger, *tally) {
	book := &ledger{writes: map[string][]acked{}}
	writes := &tally{counts: map[string]int{}}
	for w, ns := range namespaces {
		wg.Add(1)
		go func(w int, ns string) {
			defer wg.Done()
			write(ctx, rand.New(rand.NewSource(seed+int64(w))), c, commands, ns, book, writes)
		}(w, ns)
	}
	return book, writes
}

// write is one namespace's writer: new keys, and every fifth write revises an earlier
// key. A write whose replica fails is sent again to the other (a retry may restate a
// value that did commit: that is a new revision, as for any client).
func write(ctx context.Context, rng *rand.Rand, c *caller, commands []*proc, ns string, book *ledger, tl *tally) {
	var revisable []string
	for i := 0; ctx.Err() == nil; i++ {
		key, isRevision := fmt.Sprintf("k%05d", i), false
		if i%5 == 4 && len(revisable) > 0 {
			key, isRevision = revisable[rng.Intn(len(revisable))], true
		}
		value := sentence(rng, ns, i)
		for attempt := 0; attempt < 4 && ctx.Err() == nil; attempt++ {
			replica := commands[(i+attempt)%len(commands)]
			ans, err := c.at(replica.URL()).Set(context.WithoutCancel(ctx), ns, key, client.SetRequest{Value: value})
			e, isAnswer := answered(err)
			switch {
			case err != nil && !isAnswer:
				tl.count("unreachable")
			case err == nil:
				tl.count("ok")
				v := ans.VersionText
				revisableKey := i%2 == 0
				book.add(ns, acked{key: key, value: value, version: v, revisable: revisableKey || isRevision})
				if revisableKey && !isRevision {
					revisable = append(revisable, key)
				}
				attempt = 4
				continue
			case retryable503(e):
				tl.count("503 " + string(e.Code))
			default:
				tl.fail("write %s/%s on %s answered %d %s", ns, key, replica.name, e.Status, e.Body)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(40 * time.Millisecond)
	}
}

// search looks for acknowledged writes by their own text: the answer must hold the
// write, at its acknowledged version or a later one, or be a retryable 503. The writers
// never revise a key pick answers, but a later write judged in conflict with it marks
// it (conflict_with) in a new revision of the same value: never an older one.
func search(ctx context.Context, rng *rand.Rand, c *caller, queries []*proc, namespaces []string, book *ledger, tl *tally) {
	for i := 0; ctx.Err() == nil; i++ {
		ns := namespaces[rng.Intn(len(namespaces))]
		want, ok := book.pick(rng, ns)
		if !ok {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		replica := queries[i%len(queries)]
		ans, err := c.at(replica.URL()).Search(context.WithoutCancel(ctx), ns, client.SearchRequest{Query: want.value, TopK: 5})
		e, isAnswer := answered(err)
		switch {
		case err != nil && !isAnswer:
			tl.count("unreachable")
		case err == nil:
			found := false
			var got []string
			for _, hit := range ans.Hits {
				found = found || (hit.MemoryKey == want.key && atOrAfter(hit.VersionText, want.version))
				got = append(got, hit.MemoryKey+"@"+hit.VersionText)
			}
			if !found {
				tl.fail("search on %s for %s/%s (acknowledged at version %s) answered without it: %v", replica.name, ns, want.key, want.version, got)
				return
			}
			tl.count("ok")
		case retryable503(e):
			tl.count("503 " + string(e.Code))
		default:
			tl.fail("search on %s answered %d %s", replica.name, e.Status, e.Body)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// activeRelay is the relay holding the relay lock, by its loom_relay_active gauge.
func activeRelay(t *testing.T, relays []*proc) *proc {
	t.Helper()
	var active *proc
	testenv.Eventually(t, 30*time.Second, "a relay to hold the relay lock", func() bool {
		for _, p := range relays {
			if strings.Contains(metricsText(p.URL()), "\nloom_relay_active 1\n") {
				active = p
				return true
			}
		}
		return false
	})
	return active
}

// atOrAfter reports whether version got is version want or a later one (versions are
// decimal int64s, increasing per key).
func atOrAfter(got, want string) bool {
	g, errG := strconv.ParseInt(got, 10, 64)
	w, errW := strconv.ParseInt(want, 10, 64)
	return errG == nil && errW == nil && g >= w
}
