package bench

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/internal/indexfeed"
	"github.com/loomplane/loom/internal/kafka"
	"github.com/loomplane/loom/internal/searchindex"
)

// coldstartTimeout bounds one warm-up of a fresh index.
const coldstartTimeout = 30 * time.Minute

// bytesPerMemoryGate is the target for the index's memory per 384-dim memory.
const bytesPerMemoryGate = 1024

// coldstart measures how a process warms its search index: a fresh index and its
// follower, built as a starting process builds them, replay the whole topic (decode,
// one Postgres query per batch for the data keys, open, apply) until warm, against the
// bare kgo read of the same topic. It then reports what the index holds per memory.
func (r *runner) coldstart(ctx context.Context) (*ScenarioResult, error) {
	n := r.t.Process
	cfg := n.Cfg
	res := &ScenarioResult{
		Title: "search index cold start: records/s into a fresh index, and its bytes per memory",
		Baseline: "a bare kgo read of the same topic from start to end: no decoding, no data keys, no index " +
			"(internal/kafka.ReadTopic)",
		Notes: []string{"the fresh index is built as a starting process builds it (internal/indexfeed with this process's " +
			"settings) and is timed from its start until it is warm: every record the topic held when it started applied; " +
			"the topic holds every revision of the run so far",
			"bytes per memory: the index's own estimate of its structures (int8 vectors with their scales, chunk vectors, " +
				"lexical postings, key words, filter columns), and the Go heap it added, measured after a GC, each over the " +
				"memories it holds; the graphs of namespaces past LOOM_INDEX_GRAPH_MIN are built after the warm-up, so the " +
				"process under test's own index (its graphs built) is reported beside it"},
	}
	cl, err := kafka.NewClient(cfg.Kafka.Brokers)
	if err != nil {
		return nil, err
	}
	records, _, err := topicSpan(ctx, kadm.NewClient(cl), cfg.Pipeline.Topic)
	cl.Close()
	if err != nil {
		return nil, err
	}
	if records == 0 {
		return nil, fmt.Errorf("the topic %s is empty: run a scenario that writes first", cfg.Pipeline.Topic)
	}

	r.progress("  bare read of %d records", records)
	start := time.Now()
	read, err := kafka.ReadTopic(ctx, cfg.Kafka.Brokers, cfg.Pipeline.Topic, func(*kgo.Record) {})
	if err != nil {
		return nil, err
	}
	rawTook := time.Since(start)

	r.progress("  warm a fresh index from %d records", records)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	x := searchindex.New(searchindex.Config{GraphMin: cfg.SearchIndex.GraphMin})
	defer x.Close()
	feed := indexfeed.New(indexfeed.Config{Brokers: cfg.Kafka.Brokers, Topic: cfg.Pipeline.Topic, BatchRecords: cfg.SearchIndex.BatchRecords,
		FetchMaxWait: cfg.SearchIndex.FetchMaxWait, MaxBytes: cfg.SearchIndex.MaxBytes}, n.PG, x, n.Log)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	start = time.Now()
	go func() { ran <- feed.Run(runCtx) }()
	select {
	case <-feed.Warmed():
	case err := <-ran:
		stop()
		return nil, fmt.Errorf("the index follower stopped before it was warm: %w", err)
	case <-time.After(coldstartTimeout):
		stop()
		<-ran
		return nil, fmt.Errorf("the fresh index was not warm after %s: %+v", coldstartTimeout, feed.Progress())
	}
	took := time.Since(start)
	applied := feed.Progress().Applied
	stop()
	<-ran
	stats := x.Stats()
	runtime.GC()
	runtime.ReadMemStats(&after)
	r.progress("    warm in %s: %d records applied, %d memories, %d bytes", took.Round(time.Millisecond), applied, stats.Entries, stats.Bytes)

	name := fmt.Sprintf("%d records", records)
	rate, rawRate := round(float64(applied)/took.Seconds(), 1), round(float64(read)/rawTook.Seconds(), 1)
	res.add(name, "records/s", rate, rawRate)
	res.add(name, "seconds", round(took.Seconds(), 2), round(rawTook.Seconds(), 2))
	res.Rows = append(res.Rows, Row{Case: name, Metric: "1M records warm, extrapolated s", Loom: round(1e6/rate, 1),
		Gate: fmt.Sprintf("≤ 30 s: %s", passFail(1e6/rate <= 30))})
	res.Samples = append(res.Samples, CaseSamples{Case: name,
		Loom:     Sample{Calls: int(applied), Seconds: round(took.Seconds(), 2), PerSecond: rate},
		Baseline: &Sample{Calls: int(read), Seconds: round(rawTook.Seconds(), 2), PerSecond: rawRate}})
	if stats.Entries > 0 {
		mem := fmt.Sprintf("%d memories in %d namespaces", stats.Entries, stats.Namespaces)
		per := float64(stats.Bytes) / float64(stats.Entries)
		res.Rows = append(res.Rows,
			Row{Case: mem + ", fresh index", Metric: "bytes/memory (estimate)", Loom: round(per, 0),
				Gate: fmt.Sprintf("≤ %d: %s", bytesPerMemoryGate, passFail(per <= bytesPerMemoryGate))},
			Row{Case: mem + ", fresh index", Metric: "bytes/memory (Go heap added)",
				Loom: round(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(stats.Entries), 0)})
	}
	if own := n.Index(); own != nil {
		st := own.Stats()
		graph := 0
		for _, sp := range st.Spaces {
			graph += sp.Graph
		}
		if st.Entries > 0 {
			per := float64(st.Bytes) / float64(st.Entries)
			res.Rows = append(res.Rows, Row{Case: fmt.Sprintf("%d memories, %d graph nodes, the process under test's index", st.Entries, graph),
				Metric: "bytes/memory (estimate)", Loom: round(per, 0),
				Gate: fmt.Sprintf("≤ %d: %s", bytesPerMemoryGate, passFail(per <= bytesPerMemoryGate))})
		}
	}
	return res, nil
}
