package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/kafka"
	"github.com/loomplane/loom/internal/searchindex"
	"github.com/loomplane/loom/internal/watermarks"
	"github.com/loomplane/loom/relay"
)

// lagPoll is how often a lag sample looks for its row in ClickHouse and its
// watermark in Postgres: the resolution of the ClickHouse and watermark columns.
const lagPoll = 2 * time.Millisecond

// lagTimeout bounds one write's wait to become searchable: past it the pipeline is
// stuck, not slow.
const lagTimeout = time.Minute

// phases collects, for each sample, how long after its start it reached each stage.
type phases struct {
	mu                                  sync.Mutex
	toTopic, topicToCH, toCH, toBarrier []time.Duration
	toIndex                             []time.Duration // commit→in the process's search index
}

// add records a sample that was on the topic after onTopic and in ClickHouse after
// inCH and, when hasMark, under the watermark after underMark.
func (p *phases) add(onTopic, inCH, underMark time.Duration, hasMark bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.toTopic = append(p.toTopic, onTopic)
	p.topicToCH = append(p.topicToCH, inCH-onTopic)
	p.toCH = append(p.toCH, inCH)
	if hasMark {
		p.toBarrier = append(p.toBarrier, underMark)
	}
}

// lag measures how long a write takes to become searchable. Each writer writes a new
// key and then watches, from the moment the answer arrives, for its record on the
// topic (a tail consumer), its row in loom.memory_embeddings (what a search without
// the barrier reads) and the serving projection's watermark (what the barrier waits
// for), before its next write. The baseline does the same hops bare: a produce to a
// scratch topic seen by a tail consumer, then a one-row ClickHouse insert read back.
func (r *runner) lag(ctx context.Context) (*ScenarioResult, error) {
	n := r.t.Process
	res := &ScenarioResult{
		Title: "commit-to-searchable latency",
		Baseline: "the same hops done bare: a kgo produce (the relay's producer settings) to a scratch topic until a tail consumer " +
			"fetches it, then a one-row ClickHouse insert (PrepareBatch) until a SELECT sees it",
		Notes: []string{
			"Loom's clock starts when memory.set's answer arrives; commit→topic ends when a tail consumer fetches the record, " +
				"topic→ClickHouse when its row is in loom.memory_embeddings (the vector leg's table), " +
				"commit→searchable is the two together: when a search that does not wait at the barrier would find it",
			"search has no request option to skip the barrier, so the row's arrival is read from ClickHouse directly, polled every " +
				lagPoll.String() + "; commit→barrier is when the serving projection's watermark reached the write's seq " +
				"(a barrier search would then pass)",
			fmt.Sprintf("the projector starts at most one batch per LOOM_PG_PUBLISH_INTERVAL_MS (%d ms), with a second's worth of batches saved up",
				n.Cfg.Projector.Interval.Milliseconds()),
			"the namespace is append_only: writes are not judged against each other",
			"commit→index is when the process's in-process search index (LOOM_SEARCH_INDEX=memory) has applied the write's seq: " +
				"a search served by it is then searchable and passes its barrier; its baseline is the bare commit→topic hop " +
				"(a produce until a tail consumer fetches it), since the index applies records as they are fetched",
			"commit→index is read from the loop that watches the index alone: the loop that also watches ClickHouse and the " +
				"watermark polls them every " + lagPoll.String() + " per writer, and those polls take a core from the hops it times; " +
				"its traced twin splits each write into hops, and counts the writes over 20 ms by the hop they spent the longest in",
		},
	}
	ns := r.namespace("lag")
	if err := r.appendOnly(ctx, ns); err != nil {
		return nil, err
	}
	prefix := events.RecordID(r.t.Org, ns, 0)
	prefix = prefix[:len(prefix)-1] // "org/ns/"
	tl, err := startTail(ctx, n.Cfg.Kafka.Brokers, n.Cfg.Pipeline.Topic, func(rec *kgo.Record) string {
		if id := header(rec, "ce_id"); len(id) > len(prefix) && id[:len(prefix)] == prefix {
			return id
		}
		return ""
	})
	if err != nil {
		return nil, err
	}
	defer tl.close()
	hop, err := r.startHop(ctx)
	if err != nil {
		return nil, err
	}
	defer hop.close()
	for _, conc := range r.levels(1) {
		name := fmt.Sprintf("concurrency=%d", conc)
		var loom phases
		_, err := r.closedLoop(ctx, "write and watch "+name, conc, 2*r.opts.Duration, func(ctx context.Context, _, i int) error {
			return r.lagSample(ctx, ns, i, tl, &loom)
		})
		if err != nil {
			return nil, err
		}
		var bare phases
		_, err = r.closedLoop(ctx, "bare hops "+name, conc, r.opts.Duration, func(ctx context.Context, _, _ int) error {
			return hop.sample(ctx, &bare)
		})
		if err != nil {
			return nil, err
		}
		for _, st := range []struct {
			stage      string
			loom, bare []time.Duration
		}{
			{"commit→topic", loom.toTopic, bare.toTopic},
			{"topic→ClickHouse", loom.topicToCH, bare.topicToCH},
			{"commit→searchable", loom.toCH, bare.toCH},
		} {
			l, b := summarize(st.loom, 0), summarize(st.bare, 0)
			res.add(name+", "+st.stage, "p50 ms", l.P50MS, b.P50MS)
			res.add(name+", "+st.stage, "p99 ms", l.P99MS, b.P99MS)
		}
		if len(loom.toIndex) > 0 {
			l, b := summarize(loom.toIndex, 0), summarize(bare.toTopic, 0)
			res.add(name+", commit→index (searchable, barrier passes)", "p50 ms", l.P50MS, b.P50MS)
			res.add(name+", commit→index (searchable, barrier passes)", "p99 ms", l.P99MS, b.P99MS)
		}
		if index := r.t.Process.Index(); index != nil {
			if err := r.lagIndexAlone(ctx, res, ns, name, conc, index, bare.toTopic); err != nil {
				return nil, err
			}
			if err := r.lagHops(ctx, res, ns, name, conc); err != nil {
				return nil, err
			}
		}
		mark := summarize(loom.toBarrier, 0)
		res.Rows = append(res.Rows,
			Row{Case: name + ", commit→barrier passes", Metric: "p50 ms", Loom: mark.P50MS},
			Row{Case: name + ", commit→barrier passes", Metric: "p99 ms", Loom: mark.P99MS})
		res.Notes = append(res.Notes, fmt.Sprintf("%s: %d writes watched, %d bare hops", name, len(loom.toCH), len(bare.toCH)))
	}
	return res, nil
}

// lagIndexAlone measures commit→index with a loop that waits for the in-process index
// alone: each write of the main loop waits for ClickHouse too, so it samples the index
// a few times a second at most, too few for a tail worth reading.
func (r *runner) lagIndexAlone(ctx context.Context, res *ScenarioResult, ns, name string, conc int, index *searchindex.Index, bareToTopic []time.Duration) error {
	var toIndex []time.Duration
	var mu sync.Mutex
	before := readCPU()
	_, err := r.closedLoop(ctx, "write until indexed "+name, conc, r.opts.Duration, func(ctx context.Context, _, i int) error {
		s, err := r.indexSample(ctx, ns, index, i)
		if err != nil {
			return err
		}
		mu.Lock()
		toIndex = append(toIndex, s.visible.Sub(s.answered))
		mu.Unlock()
		return nil
	})
	used := readCPU().sub(before)
	if err != nil {
		return err
	}
	l, b := summarize(toIndex, 0), summarize(bareToTopic, 0)
	res.add(name+", commit→index, index alone watched", "p50 ms", l.P50MS, b.P50MS)
	res.add(name+", commit→index, index alone watched", "p99 ms", l.P99MS, b.P99MS)
	// What a write costs, end to end (its set and everything after it): at c=8 a wake
	// or a wait cut from the path must not buy its latency with CPU.
	per := func(d time.Duration) float64 { return round(d.Seconds()*1000/float64(max(len(toIndex), 1)), 3) }
	res.Rows = append(res.Rows,
		plainRow(name+", commit→index, index alone watched", "CPU ms per write: this process (every role, the client, the broker)", per(used.self)),
		plainRow(name+", commit→index, index alone watched", "CPU ms per write: with Postgres and ClickHouse", per(used.tree)))
	if load, ok := load1(); ok {
		res.Rows = append(res.Rows, plainRow(name+", commit→index, index alone watched", "load average (1 min) at the end", load))
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%s: %d writes watched by the index alone", name, len(toIndex)))
	return nil
}

// lagSample writes key i and waits until it is on the topic, in ClickHouse and under
// the watermark.
func (r *runner) lagSample(ctx context.Context, ns string, i int, tl *tail, into *phases) error {
	ans, err := r.api.Set(ctx, ns, fmt.Sprintf("k%d", i), client.SetRequest{Value: fmt.Sprintf("lag probe %d", i)})
	if err != nil {
		return err
	}
	answered := time.Now()
	id := events.RecordID(r.t.Org, ns, ans.Seq)
	n := r.t.Process
	var inCH, underMark, inIndex time.Time
	ctx, cancel := context.WithTimeout(ctx, lagTimeout)
	defer cancel()
	// The index says when it applies a seq: waited for in process, at no poll's resolution.
	index := n.Index()
	indexed := make(chan time.Time, 1)
	if index != nil {
		go func() {
			if index.WaitFor(ctx, searchindex.Space{Org: r.t.Org, Namespace: ns}, ans.Seq) == nil {
				indexed <- time.Now()
			}
		}()
	}
	for {
		onTopic, seen := tl.at(id)
		if inCH.IsZero() {
			var rows uint64
			if err := n.CH.QueryRow(n.CH.Ctx(ctx), `SELECT count() FROM loom.memory_embeddings
				PREWHERE org = ? AND namespace = ? AND memory_key = ? WHERE seq = ?`,
				r.t.Org, ns, fmt.Sprintf("k%d", i), uint64(ans.Seq)).Scan(&rows); err != nil {
				return fmt.Errorf("look for %s in ClickHouse: %w", id, err)
			}
			if rows > 0 {
				inCH = time.Now()
			}
		}
		if underMark.IsZero() {
			mark, err := watermarks.Read(ctx, n.PG, n.Cfg.Pipeline.Projection, r.t.Org, ns)
			if err != nil {
				return fmt.Errorf("read the watermark of %s: %w", ns, err)
			}
			if mark >= ans.Seq {
				underMark = time.Now()
			}
		}
		if index != nil && inIndex.IsZero() {
			select {
			case inIndex = <-indexed:
			default:
			}
		}
		if seen && !inCH.IsZero() && !underMark.IsZero() && (index == nil || !inIndex.IsZero()) {
			into.add(onTopic.Sub(answered), inCH.Sub(answered), underMark.Sub(answered), true)
			if index != nil {
				into.mu.Lock()
				into.toIndex = append(into.toIndex, inIndex.Sub(answered))
				into.mu.Unlock()
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not searchable after %s (on the topic: %v, in ClickHouse: %v, under the watermark: %v): %w",
				id, lagTimeout, seen, !inCH.IsZero(), !underMark.IsZero(), ctx.Err())
		case <-time.After(lagPoll):
		}
	}
}

// indexSample writes a key and returns when its answer arrived and when the process's
// index had applied it (its waiter woke).
func (r *runner) indexSample(ctx context.Context, ns string, index *searchindex.Index, i int) (indexed, error) {
	ans, err := r.api.Set(ctx, ns, fmt.Sprintf("x%d", i), client.SetRequest{Value: fmt.Sprintf("lag probe %d", i)})
	if err != nil {
		return indexed{}, err
	}
	s := indexed{seq: ans.Seq, answered: time.Now()}
	wctx, cancel := context.WithTimeout(ctx, lagTimeout)
	defer cancel()
	if err := index.WaitFor(wctx, searchindex.Space{Org: r.t.Org, Namespace: ns}, ans.Seq); err != nil {
		return indexed{}, fmt.Errorf("wait for the index to apply %s seq %d: %w", ns, ans.Seq, err)
	}
	s.visible = time.Now()
	return s, nil
}

// hop is the lag baseline's scratch topic, its producer and tail, and a scratch
// ClickHouse table.
type hop struct {
	r        *runner
	producer *kgo.Client
	tail     *tail
	next     atomic.Uint64 // numbers the records and rows across runs, so none is seen early
}

func (r *runner) startHop(ctx context.Context) (*hop, error) {
	n := r.t.Process
	cl, err := kafka.NewClient(n.Cfg.Kafka.Brokers)
	if err != nil {
		return nil, err
	}
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, r.hopTopic())
	cl.Close()
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return nil, fmt.Errorf("create the scratch topic %s: %w", r.hopTopic(), err)
	}
	r.hopCreated = true
	for _, ddl := range []string{
		"CREATE DATABASE IF NOT EXISTS " + scratchDatabase,
		"CREATE TABLE IF NOT EXISTS " + scratchDatabase + ".hop (id UInt64, payload String) ENGINE = MergeTree ORDER BY id",
	} {
		if err := n.CH.Exec(n.CH.Ctx(ctx), ddl); err != nil {
			return nil, fmt.Errorf("create the scratch table: %w", err)
		}
	}
	producer, err := kafka.NewClient(n.Cfg.Kafka.Brokers, relay.ProducerOpts(n.Cfg.Kafka.MaxRecordBytes)...)
	if err != nil {
		return nil, err
	}
	tl, err := startTail(ctx, n.Cfg.Kafka.Brokers, r.hopTopic(), func(rec *kgo.Record) string { return string(rec.Key) })
	if err != nil {
		producer.Close()
		return nil, err
	}
	return &hop{r: r, producer: producer, tail: tl}, nil
}

// sample produces a record and waits for the tail to fetch it, then inserts a row and
// reads it back.
func (h *hop) sample(ctx context.Context, into *phases) error {
	conn := h.r.t.Process.CH
	i := h.next.Add(1)
	key := fmt.Sprint(i)
	start := time.Now()
	if err := h.producer.ProduceSync(ctx, &kgo.Record{Topic: h.r.hopTopic(), Key: []byte(key), Value: make([]byte, 2400)}).FirstErr(); err != nil {
		return fmt.Errorf("produce to %s: %w", h.r.hopTopic(), err)
	}
	wait, cancel := context.WithTimeout(ctx, lagTimeout)
	defer cancel()
	var onTopic time.Time
	for {
		at, ok := h.tail.at(key)
		if ok {
			onTopic = at
			break
		}
		select {
		case <-wait.Done():
			return fmt.Errorf("the tail of %s did not fetch record %s: %w", h.r.hopTopic(), key, wait.Err())
		case <-time.After(lagPoll):
		}
	}
	batch, err := conn.PrepareBatch(conn.Ctx(ctx), "INSERT INTO "+scratchDatabase+".hop (id, payload)")
	if err != nil {
		return fmt.Errorf("prepare the scratch insert: %w", err)
	}
	if err := batch.Append(i, "a row of the lag baseline"); err != nil {
		batch.Abort()
		return fmt.Errorf("append to the scratch insert: %w", err)
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("scratch insert: %w", err)
	}
	for {
		var rows uint64
		if err := conn.QueryRow(conn.Ctx(ctx), "SELECT count() FROM "+scratchDatabase+".hop WHERE id = ?", i).Scan(&rows); err != nil {
			return fmt.Errorf("read the scratch row back: %w", err)
		}
		if rows > 0 {
			into.add(onTopic.Sub(start), time.Since(start), 0, false)
			return nil
		}
		select {
		case <-wait.Done():
			return fmt.Errorf("scratch row %d never became visible: %w", i, wait.Err())
		case <-time.After(lagPoll):
		}
	}
}

func (h *hop) close() {
	h.tail.close()
	h.producer.Close()
}
