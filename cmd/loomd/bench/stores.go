package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/kafka"
)

// Scratch objects the baselines create next to Loom's and the run drops at its end:
// a Postgres schema, a ClickHouse database and a topic, all named for the bench so
// they are never mistaken for Loom's own.
const (
	scratchSchema   = "bench_raw"
	scratchDatabase = "loom_bench"
)

// hopTopic is this run's scratch topic.
func (r *runner) hopTopic() string { return "loom.bench.hop." + r.runID }

// dropScratch removes the scratch objects, best effort: a store that outlives the run
// (configured stores) should not keep them.
func (r *runner) dropScratch() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := r.t.Process
	if _, err := n.PG.Exec(ctx, "DROP SCHEMA IF EXISTS "+scratchSchema+" CASCADE"); err != nil {
		r.progress("could not drop the scratch schema %s: %v", scratchSchema, err)
	}
	if err := n.CH.Exec(ctx, "DROP DATABASE IF EXISTS "+scratchDatabase); err != nil {
		r.progress("could not drop the scratch database %s: %v", scratchDatabase, err)
	}
	if r.hopCreated {
		cl, err := kafka.NewClient(n.Cfg.Kafka.Brokers)
		if err == nil {
			_, err = kadm.NewClient(cl).DeleteTopics(ctx, r.hopTopic())
			cl.Close()
		}
		if err != nil {
			r.progress("could not delete the scratch topic %s: %v", r.hopTopic(), err)
		}
	}
}

// scanAll runs a ClickHouse query and reads every row of its answer.
func scanAll(ctx context.Context, conn *ch.Conn, q string, args ...any) error {
	rows, err := conn.Query(conn.Ctx(ctx), q, args...)
	if err != nil {
		return fmt.Errorf("ClickHouse query: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ClickHouse query: %w", err)
	}
	return nil
}

// tail follows a topic from its end at the time it starts and notes when each record
// was first fetched, by an id the caller derives from the record ("" to ignore it).
type tail struct {
	cl   *kgo.Client
	stop context.CancelFunc
	done chan struct{}
	mu   sync.Mutex
	seen map[string]time.Time
}

// startTail starts following topic. It resolves the end offsets before it returns, so
// every record produced after the call is seen.
func startTail(ctx context.Context, brokers []string, topic string, id func(*kgo.Record) string) (*tail, error) {
	admin, err := kafka.NewClient(brokers)
	if err != nil {
		return nil, err
	}
	_, ends, err := kafka.Span(ctx, kadm.NewClient(admin), topic)
	admin.Close()
	if err != nil {
		return nil, err
	}
	from := map[int32]kgo.Offset{}
	for p, end := range ends {
		from[p] = kgo.NewOffset().At(end)
	}
	// A fetch answers as soon as a record arrives; the short wait only bounds how long
	// an idle fetch is held.
	cl, err := kafka.NewClient(brokers, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return nil, err
	}
	pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	t := &tail{cl: cl, stop: stop, done: make(chan struct{}), seen: map[string]time.Time{}}
	go func() {
		defer close(t.done)
		for pctx.Err() == nil {
			fetches := cl.PollFetches(pctx)
			now := time.Now()
			t.mu.Lock()
			fetches.EachRecord(func(rec *kgo.Record) {
				if k := id(rec); k != "" {
					if _, dup := t.seen[k]; !dup {
						t.seen[k] = now
					}
				}
			})
			t.mu.Unlock()
		}
	}()
	return t, nil
}

// at says when the record id was first fetched.
func (t *tail) at(id string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.seen[id]
	return at, ok
}

func (t *tail) close() {
	t.stop()
	<-t.done
	t.cl.Close()
}

// header is a record header's value, "" when the record has none of that name.
func header(rec *kgo.Record, key string) string {
	for _, h := range rec.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// metric reads one series (name and labels, as /metrics prints them) from the process
// under test's /metrics; a series not printed yet is 0.
func (r *runner) metric(ctx context.Context, series string) (float64, error) {
	text, err := r.api.Metrics(ctx)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("metric %s is %q: %w", series, v, err)
			}
			return f, nil
		}
	}
	return 0, nil
}

// projectorBatches is how many batches the serving projection has written in the
// process under test.
func (r *runner) projectorBatches(ctx context.Context) (float64, error) {
	return r.metric(ctx, `loom_projector_batch_seconds_count{projection="`+r.t.Process.Cfg.Pipeline.Projection+`"}`)
}
