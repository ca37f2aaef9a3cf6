package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/projector"
	"github.com/loomplane/loom/tests/testenv"
)

// SIGTERM stops a query process only after the request it is serving has answered:
// a search waiting at the barrier (no projector runs) keeps the process alive, new
// connections are refused meanwhile, and once a projector catches up the search
// answers 200 with the write and the process exits cleanly. The query process reads
// ClickHouse (LOOM_SEARCH_INDEX=clickhouse): its own index would let the search through
// at once, and the barrier's wait is what this test holds open.
func TestSIGTERMDrainsAnInFlightSearch(t *testing.T) {
	q := newProc(t, "query", "query", map[string]string{"LOOM_PG_PROJECTION_WAIT_MS": "20000", "LOOM_SEARCH_INDEX": "clickhouse"})
	w := newProc(t, "command-relay", "command,relay", nil)
	for _, p := range []*proc{q, w} {
		p.start(t)
		p.waitReady(t)
	}
	c := newCaller(loomdCLI(t, "token", "create", "--org", org))
	ns := testenv.Unique(t, "drain")
	ctx := context.Background()
	if _, err := c.at(w.URL()).Set(ctx, ns, "k", client.SetRequest{Value: "the write the search waits for"}); err != nil {
		t.Fatalf("write: %v", err)
	}
	type searched struct {
		ans *client.SearchAnswer
		err error
	}
	result := make(chan searched, 1)
	go func() {
		ans, err := c.at(q.URL()).Search(ctx, ns, client.SearchRequest{Query: "the write the search waits for"})
		result <- searched{ans, err}
	}()
	time.Sleep(500 * time.Millisecond)
	select {
	case a := <-result:
		t.Fatalf("the search answered before any projector ran: %+v %v", a.ans, a.err)
	default:
	}
	q.cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(time.Second)
	if !q.running() {
		t.Fatalf("the query process exited with a search in flight:\n%s", tailFile(q.log, 10))
	}
	if _, err := newCaller("").at(q.URL()).Health(ctx); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("a new connection to a stopping process: %v, want it refused", err)
	}

	p := newProc(t, "projector", "projector", nil)
	p.start(t)
	select {
	case a := <-result:
		if a.err != nil || len(a.ans.Hits) != 1 {
			t.Fatalf("the drained search: %+v %v", a.ans, a.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the search never answered")
	}
	if err := q.terminate(t, 10*time.Second); err != nil {
		t.Fatalf("the query process exited with %v after draining", err)
	}
	for _, p := range []*proc{p, w} {
		if err := p.terminate(t, 30*time.Second); err != nil {
			t.Fatalf("%s exited with %v", p.name, err)
		}
	}
}

// SIGTERM to a process running every role while writes pour in and its relay and
// projector work through a backlog, one record per relay round and a handful per
// projector batch, so the signal lands mid-round and mid-batch: in-flight writes are
// answered (a write whose connection was reset, which the kernel does to connections
// still queued on a closing listener, never committed), the relay's round and the
// projector's batch finish, offsets are committed and the group left. A successor
// publishes only what was never published and projects only what was never
// projected: every seq is on the topic once and the new projector meets no record
// twice. ClickHouse then equals the journal.
func TestSIGTERMFinishesTheRelayRoundAndTheProjectorBatch(t *testing.T) {
	ns := testenv.Unique(t, "term")
	backlog := newProc(t, "backlog-writer", "command", nil)
	backlog.start(t)
	backlog.waitReady(t)
	c := newCaller(loomdCLI(t, "token", "create", "--org", org, "--role", "admin"))
	// A pipeline test: its writes must not be judged against each other, or their
	// verdicts' copies would swell the backlog and the admission refuse it.
	if _, err := c.at(backlog.URL()).Configure(context.Background(), ns, client.NamespaceConfig{ConflictPolicy: "append_only"}); err != nil {
		t.Fatalf("configure %s: %v", ns, err)
	}
	var mu sync.Mutex
	var acks, cut, bad []string
	writers := func(url string, count int, stop <-chan struct{}) *sync.WaitGroup {
		var wg sync.WaitGroup
		for w := 0; w < 6; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; count < 0 || i < count; i++ {
					select {
					case <-stop:
						return
					default:
					}
					key := fmt.Sprintf("%s-w%d-%d", strings.TrimPrefix(url, "http://127.0.0.1:"), w, i)
					ans, err := c.at(url).Set(context.Background(), ns, key, client.SetRequest{Value: "written around a SIGTERM " + key})
					e, isAnswer := answered(err)
					mu.Lock()
					switch {
					case err != nil && !isAnswer && errors.Is(err, syscall.ECONNREFUSED):
						// The listener has closed: the request never reached the process.
					case err != nil && !isAnswer:
						cut = append(cut, key)
					case err == nil:
						acks = append(acks, key+"@"+ans.VersionText)
					default:
						bad = append(bad, fmt.Sprintf("write %s answered %d %s", key, e.Status, e.Body))
					}
					mu.Unlock()
					if err != nil && !isAnswer {
						time.Sleep(20 * time.Millisecond)
					}
				}
			}(w)
		}
		return &wg
	}
	writers(backlog.URL(), 300, nil).Wait()
	if err := backlog.terminate(t, 30*time.Second); err != nil {
		t.Fatalf("backlog writer: %v", err)
	}

	a := newProc(t, "all-roles", "command,query,relay,projector", map[string]string{
		"LOOM_OUTBOX_BATCH_ROWS": "1", "LOOM_PROJECTOR_BATCH_ROWS": "5", "LOOM_PG_PUBLISH_INTERVAL_MS": "0"})
	a.start(t)
	a.waitReady(t)
	stop := make(chan struct{})
	wg := writers(a.URL(), -1, stop)
	pool := env.PG(t)
	testenv.Eventually(t, 60*time.Second, "the relay and the projector to be under way", func() bool {
		return testenv.Watermark(t, pool, "main", org, ns) >= 20
	})
	if testenv.Int(t, pool, `SELECT count(*) FROM loom.outbox WHERE org = $1 AND namespace = $2`, org, ns) == 0 {
		t.Fatal("the relay is through the backlog already: the SIGTERM would not meet a round under way")
	}
	if err := a.terminate(t, 30*time.Second); err != nil {
		t.Fatalf("exit on SIGTERM: %v\n%s", err, tailFile(a.log, 20))
	}
	close(stop)
	wg.Wait()
	for _, b := range bad {
		t.Error(b)
	}
	if t.Failed() {
		t.FailNow()
	}

	// The projector left its group on the way out, so a successor is assigned at once,
	// and committed the offsets of everything it wrote: each record at or below the
	// namespace's watermark lies below its partition's committed offset.
	admin, err := kgo.NewClient(kgo.SeedBrokers(env.Config(nil).Kafka.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(admin)
	groups, err := adm.DescribeGroups(context.Background(), projector.Group("main"))
	if err != nil {
		t.Fatal(err)
	}
	if g := groups[projector.Group("main")]; len(g.Members) != 0 {
		t.Fatalf("the stopped projector is still a member of %s: %+v", g.Group, g.Members)
	}
	committed, err := adm.FetchOffsets(context.Background(), projector.Group("main"))
	admin.Close()
	if err != nil {
		t.Fatal(err)
	}
	written := testenv.Watermark(t, pool, "main", org, ns)
	for _, r := range env.NamespaceRecords(t, org, ns) {
		if o, ok := committed.Lookup(r.Topic, r.Partition); r.Seq <= written && (!ok || r.Offset >= o.At) {
			t.Fatalf("seq %d (partition %d offset %d) is written to ClickHouse but its offset is not committed (%+v)", r.Seq, r.Partition, r.Offset, o)
		}
	}

	b := newProc(t, "successor", "relay,projector", nil)
	b.start(t)
	b.waitReady(t)
	testenv.Eventually(t, 60*time.Second, "the successor to publish and project the rest", func() bool {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.outbox WHERE org = $1 AND namespace = $2`, org, ns) == 0 &&
			testenv.Watermark(t, pool, "main", org, ns) == testenv.Generation(t, pool, org, ns)
	})
	copies := env.SeqCopies(t, org, ns)
	gen := testenv.Generation(t, pool, org, ns)
	for seq := int64(1); seq <= gen; seq++ {
		if copies[seq] != 1 {
			t.Errorf("seq %d is on the topic %d times: the stopped relay did not finish its round", seq, copies[seq])
		}
	}
	metrics := metricsText(b.URL())
	if !strings.Contains(metrics, "\nloom_projector_duplicates_total{projection=\"main\"} 0\n") {
		t.Errorf("the successor projector met records the stopped one had written:\n%s", grep(metrics, "loom_projector_"))
	}
	testenv.CheckProjection(t, pool, env.CH(t), "main", org, ns)
	for _, ack := range acks {
		key, version, _ := strings.Cut(ack, "@")
		if testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND memory_key = (SELECT loom.key_ref($1, $3)) AND version = $4::bigint`,
			org, ns, key, version) != 1 {
			t.Errorf("write %s answered 200 at version %s is not in the journal", key, version)
		}
	}
	for _, key := range cut {
		if testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND memory_key = (SELECT loom.key_ref($1, $3))`, org, ns, key) != 0 {
			t.Errorf("write %s committed but its connection was cut: the shutdown did not drain it", key)
		}
	}
	if err := b.terminate(t, 30*time.Second); err != nil {
		t.Errorf("successor: %v", err)
	}
	t.Logf("%d writes acknowledged, %d refused at the connection around the SIGTERM; %d seqs on the topic once each", len(acks), len(cut), gen)
}

func grep(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
