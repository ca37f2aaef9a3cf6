package faults

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/kafka"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/tests/testenv"
)

// While Kafka is slow to answer, writes committed during a relay round are read and
// produced in a round of their own before that answer arrives. Those rounds keep every
// namespace's order and gaplessness, refused records included (they are parked, and the
// records after them reach every consumer again after them), and an erasure's wait
// for the publishers (pg.WaitOut) still gets through them.
func TestOverlappingRelayRoundsStayInOrderAndLetAnErasureThrough(t *testing.T) {
	p := projection(t)
	// The relay's producer takes records of 8000 bytes at most and fails a larger one
	// before sending it, alone: the records after it in its partition go through, in
	// the round in flight and in the round read after it.
	const maxRecord = 8000
	topic := env.CreateTopic(t, map[string]string{"max.message.bytes": strconv.Itoa(maxRecord + kafka.BatchOverheadBytes)})
	onTopic := func(c *config.Config) { c.Pipeline.Topic = topic; c.Pipeline.Projection = p; c.Relay.MaxAttempts = 2 }
	n, url := env.API(t, onTopic)
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	pool, conn := env.PG(t), env.CH(t)
	ns, other := testenv.Unique(t, "overlap"), testenv.Unique(t, "overlap-other")
	c.AppendOnly(t, other)
	c.Configure(t, ns, map[string]any{"conflict_policy": "append_only", "types": map[string]any{"fact": map[string]any{"char_limit": 120000}}})

	// Every produce to the topic is answered 100 ms late: a round waits that long for
	// its acknowledgement, and the writes below commit meanwhile.
	var slow atomic.Bool
	slow.Store(true)
	cluster := env.Stack.Kafka.Cluster
	cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if !slow.Load() {
			cluster.DropControl()
			return nil, nil, false
		}
		for _, tp := range req.(*kmsg.ProduceRequest).Topics {
			if tp.Topic == topic {
				cluster.SleepControl(func() { time.Sleep(100 * time.Millisecond) })
				break
			}
		}
		return nil, nil, false
	})
	t.Cleanup(func() { slow.Store(false) })

	// The relay's process: its metrics count the overlaps.
	rn := env.Open(t, func(c *config.Config) { onTopic(c); c.Kafka.MaxRecordBytes = maxRecord })
	rctx, stopRelay := context.WithCancel(context.Background())
	relayDone := make(chan error, 1)
	go func() { relayDone <- rn.RunRelay(rctx) }()
	t.Cleanup(func() { stopRelay(); <-relayDone })
	// A consumer that follows the topic while it is published, poll by poll (one that
	// reads it all at once sees every seq in one batch, gaps or not).
	env.Projector(t, p, onTopic)
	const writes = 30
	// Throughout, as erasures do after their commits: every round that read before a
	// wait began has ended once it returns.
	written := make(chan struct{})
	waited := make(chan error, 1)
	go func() {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := pg.WaitOut(ctx, pool, pg.LockPublishers)
			cancel()
			if err != nil {
				waited <- err
				return
			}
			select {
			case <-written:
				waited <- nil
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	for i := range writes {
		value := fmt.Sprintf("fact %d written while Kafka is slow", i)
		if i%6 == 5 {
			value = strings.Repeat("a large value that the relay's producer refuses to send ", 1800)
		}
		c.Set(t, ns, fmt.Sprintf("k%02d", i), value)
		c.Set(t, other, fmt.Sprintf("k%02d", i), fmt.Sprintf("a neighbour's fact %d", i))
	}
	close(written)
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("waiting out the publishers while rounds overlap: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("waiting out the publishers never returned while rounds overlap")
	}

	pending := func() int64 {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.outbox WHERE org = $1 AND namespace = ANY($2) AND parked_at IS NULL`,
			org, []string{ns, other})
	}
	testenv.Eventually(t, 60*time.Second, "the relay to publish or park every record", func() bool { return pending() == 0 })
	if parked := testenv.Int(t, pool, `SELECT count(*) FROM loom.outbox WHERE org = $1 AND namespace = $2 AND parked_at IS NOT NULL`, org, ns); parked != writes/6 {
		t.Fatalf("%d records parked, want the %d large ones", parked, writes/6)
	}
	var text strings.Builder
	if err := rn.Metrics.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if overlapped := sampleIn(t, "\n"+text.String(), "loom_relay_rounds_overlapped_total"); overlapped < 1 {
		t.Fatalf("no round was read while another awaited Kafka's answer (loom_relay_rounds_overlapped_total %v): the test did not overlap them", overlapped)
	}
	slow.Store(false)

	// Every seq of both namespaces is on the topic, and a consumer that follows the
	// gapless rule ends where Postgres is.
	records := env.Records(t, topic)
	for _, space := range []string{ns, other} {
		seen := map[int64]bool{}
		for _, r := range records {
			if string(r.Key) != string(events.RecordKey(org, space)) {
				continue
			}
			e, err := events.Decode(r.Value)
			if err != nil {
				t.Fatalf("record at %d/%d is not an envelope: %v", r.Partition, r.Offset, err)
			}
			seen[e.Seq] = true
		}
		for seq := int64(1); seq <= writes; seq++ {
			if !seen[seq] {
				t.Fatalf("seq %d of %s is not on the topic", seq, space)
			}
		}
	}
	// The projection, following the topic as the relay publishes, steps over the
	// placeholders to the namespace's last seq.
	for _, space := range []string{ns, other} {
		testenv.WaitProjected(t, pool, p, org, space)
	}
	if wm := testenv.Watermark(t, pool, p, org, ns); wm != writes {
		t.Fatalf("watermark %d over a parked seq, want %d", wm, writes)
	}
	testenv.CheckProjection(t, pool, conn, p, org, other)
}

// sampleIn is the value of an unlabelled series in a metrics text, or -1.
func sampleIn(t testing.TB, text, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(`\n` + regexp.QuoteMeta(name) + ` ([0-9.e+-]+)\n`).FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("metric %s: %v", name, err)
	}
	return v
}
