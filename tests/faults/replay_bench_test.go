package faults

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/loomplane/loom/command/relay"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/projector"
	"github.com/loomplane/loom/tests/testenv"
)

// BenchmarkResetToEarliest measures a replay: it writes LOOM_BENCH_REVISIONS (10,000)
// revisions through the API with the pipeline running, then reads the whole topic
// with a bare kgo consumer (the ceiling), then resets the projection to earliest and
// times it until caught up, and checks the tables are identical. It reports the
// projector's inserts per second during the writes: one part per table per batch.
//
//	go test ./tests/faults -run '^$' -bench ResetToEarliest -benchtime 1x
func BenchmarkResetToEarliest(b *testing.B) {
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("LOOM_BENCH_REVISIONS")); err == nil && v > 0 {
		n = v
	}
	p := projection(b)
	node, url, _ := env.Serve(b, []string{"api", "projector"}, func(c *config.Config) { c.Projection = p; c.PGPublishInterval = 250 * time.Millisecond })
	c := testenv.NewClient(url, env.Token(b, node, auth.NewToken{Org: org}))
	conn := env.CH(b)
	env.Relay(b, relay.Faults{})
	group, topic := projector.Group(p), env.Config(nil).Topic
	spaces := make([]string, 8)
	for i := range spaces {
		spaces[i] = testenv.Unique(b, fmt.Sprintf("bench-%d", i))
	}

	batches := func() float64 { return metricValue(b, url, `loom_projector_batch_seconds_count{projection="`+p+`"}`) }
	batches0, start := batches(), time.Now()
	var wg sync.WaitGroup
	for w, ns := range spaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += len(spaces) {
				c.Set(b, ns, fmt.Sprintf("k%03d", i%500), fmt.Sprintf("benchmark fact %d about %s", i, ns))
			}
		}()
	}
	wg.Wait()
	testenv.Eventually(b, 5*time.Minute, "the projection to catch up with the writes", func() bool { return env.GroupCaughtUp(b, group, topic) })
	writeTook := time.Since(start)
	inserts := batches() - batches0
	b.Logf("wrote %d revisions in %s (%.0f/s); the projector made %.0f batches: %.1f inserts (parts) per table per second",
		n, writeTook.Round(time.Millisecond), float64(n)/writeTook.Seconds(), inserts, inserts/writeTook.Seconds())
	before := testenv.TableSums(b, conn, org, spaces)

	start = time.Now()
	records := env.TopicRecords(b)
	raw := time.Since(start)
	b.Logf("bare kgo consume of the topic: %d records in %s (%.0f records/s)", len(records), raw.Round(time.Millisecond), float64(len(records))/raw.Seconds())

	start = time.Now()
	r := c.Do(b, http.MethodPost, "/v1/admin/projections/"+p+":reset", []byte(`{"to": "earliest", "execute": true}`))
	if r.Status != http.StatusOK {
		b.Fatalf("reset: %d %s", r.Status, r.Body)
	}
	var plan projector.ResetPlan
	json.Unmarshal(r.Body, &plan)
	testenv.Eventually(b, 10*time.Minute, "the replay to catch up", func() bool { return env.GroupCaughtUp(b, group, topic) })
	took := time.Since(start)
	var replayed int64
	for _, m := range plan.Partitions {
		replayed += max(m.Current, 0)
	}
	b.ReportMetric(float64(replayed)/took.Seconds(), "replayed-records/s")
	b.ReportMetric(float64(len(records))/raw.Seconds(), "raw-consume-records/s")
	b.Logf("reset to earliest: %d records replayed, caught up in %s (%.0f records/s)", replayed, took.Round(time.Millisecond), float64(replayed)/took.Seconds())
	if after := testenv.TableSums(b, conn, org, spaces); fmt.Sprint(after) != fmt.Sprint(before) {
		b.Fatalf("tables changed over the replay:\n before %v\n after  %v", before, after)
	}
}
