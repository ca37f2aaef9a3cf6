package bench

import (
	"context"
	"fmt"
	"os"
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

// coldstartTail is how many memories are written after the checkpoint, for the
// restarted index to tail.
const coldstartTail = 2000

// coldstart measures how a process warms its search index, both ways it can: a fresh
// index and follower (built as a starting process builds them) replay the whole topic
// (decode, one Postgres query per batch for the data keys, open, apply) until warm and
// write their checkpoint at the stop; then, after a tail of writes, a second fresh
// index loads that checkpoint and tails the topic from its offsets until warm. Each
// rate is beside the bare kgo read of the same topic. It then reports the Go heap each
// index holds per memory.
func (r *runner) coldstart(ctx context.Context) (*ScenarioResult, error) {
	n := r.t.Process
	topic := n.Cfg.Pipeline.Topic
	res := coldstartResult()
	cl, err := kafka.NewClient(n.Cfg.Kafka.Brokers)
	if err != nil {
		return nil, err
	}
	adm := kadm.NewClient(cl)
	defer cl.Close()
	records, _, err := topicSpan(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	if records == 0 {
		return nil, fmt.Errorf("the topic %s is empty: run a scenario that writes first", topic)
	}
	dir, err := os.MkdirTemp("", "loom-bench-index-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := r.quietOwnIndex(ctx); err != nil {
		return nil, err
	}
	if err := r.coldstartReplay(ctx, res, dir, records); err != nil {
		return nil, err
	}
	if err := r.coldstartFromCheckpoint(ctx, res, adm, dir); err != nil {
		return nil, err
	}
	return res, nil
}

// coldstartResult is the cold-start scenario's result before any row.
func coldstartResult() *ScenarioResult {
	return &ScenarioResult{
		Title: "search index cold start: records/s into a fresh index (a replay of the topic; a checkpoint and the tail), and its bytes per memory",
		Baseline: "a bare kgo read of the same topic from start to end: no decoding, no data keys, no index " +
			"(internal/kafka.ReadTopic)",
		Notes: []string{"each fresh index is built as a starting process builds it (internal/indexfeed with this process's " +
			"settings) and is timed from its start until it is warm (every record the topic held when it started applied); " +
			"the topic holds every revision of the run so far",
			fmt.Sprintf("replay: from the topic's start, no checkpoint; its checkpoint is written as it stops (LOOM_INDEX_CHECKPOINT_DIR); "+
				"checkpoint + tail: a second fresh index loads that checkpoint and tails the topic from its offsets, past %d memories "+
				"written after it; its records/s counts every record the warm index stands for", coldstartTail),
			"bytes per memory: the Go heap the index added (after a GC, its graph builds finished and its follower stopped, the process under test's own " +
				"graph builds settled first; the bench's broker runs in this process, and a connection's last fetch response, megabytes after a replay, " +
				"is not the index's), and the index's own estimate of its structures, each over the memories it holds; " +
				"a follower tidies its index as it becomes warm (dead rows, stale postings and spare capacity dropped), and a loaded one holds only what it serves"},
	}
}

// coldstartReplay warms a fresh index from the whole topic of records records, beside
// the bare read of it, and leaves its checkpoint in dir.
func (r *runner) coldstartReplay(ctx context.Context, res *ScenarioResult, dir string, records int64) error {
	rawRate, err := r.bareRead(ctx, res, records)
	if err != nil {
		return err
	}
	rest := r.restRate(restSample)
	r.progress("  replay: warm a fresh index from %d records", records)
	replayed, err := r.warm(ctx, dir)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("replay of %d records", records)
	res.add(name, "records/s", round(replayed.rate(), 1), rawRate)
	res.Rows = append(res.Rows, plainRow(name, "memories/s", round(float64(replayed.stats.Entries)/replayed.took.Seconds(), 1)))
	res.Rows = append(res.Rows, plainRow(name, "seconds", round(replayed.took.Seconds(), 2)))
	r.cpuRows(res, name, replayed.cpuStart, replayed.cpuWarm, float64(replayed.stats.Entries), "memories")
	rest.rows(res, name)
	res.Rows = append(res.Rows, Row{Case: name, Metric: "1M records warm, extrapolated s", Loom: round(1e6/replayed.rate(), 1),
		Gate: fmt.Sprintf("≤ 30 s: %s", passFail(1e6/replayed.rate() <= 30))})
	res.Samples = append(res.Samples, CaseSamples{Case: name,
		Loom:     Sample{Calls: int(replayed.progress.Applied), Seconds: round(replayed.took.Seconds(), 2), PerSecond: round(replayed.rate(), 1)},
		Baseline: &Sample{Calls: int(records), PerSecond: rawRate}})
	res.Rows = append(res.Rows, plainRow(name, "checkpoint written at the stop, s", round(replayed.stopTook.Seconds(), 2)))
	res.Rows = append(res.Rows, plainRow(name, "checkpoint bytes/memory", round(float64(replayed.progress.CheckpointBytes)/float64(max(replayed.stats.Entries, 1)), 0)))
	replayed.memoryRows(res, name)
	return nil
}

// coldstartFromCheckpoint writes a tail of memories past the checkpoint in dir, then
// warms a second fresh index from that checkpoint and the topic's tail, beside the
// bare read of the whole topic.
func (r *runner) coldstartFromCheckpoint(ctx context.Context, res *ScenarioResult, adm *kadm.Client, dir string) error {
	ns := r.namespace("coldstart-tail")
	if err := r.appendOnly(ctx, ns); err != nil {
		return err
	}
	if err := r.load(ctx, ns, coldstartTail); err != nil {
		return err
	}
	records, _, err := topicSpan(ctx, adm, r.t.Process.Cfg.Pipeline.Topic)
	if err != nil {
		return err
	}
	rawRate, err := r.bareRead(ctx, nil, records)
	if err != nil {
		return err
	}
	r.progress("  checkpoint + tail: warm a fresh index from its checkpoint and the topic's tail (%d records in all)", records)
	loaded, err := r.warm(ctx, dir)
	if err != nil {
		return err
	}
	if loaded.progress.Restored == 0 {
		return fmt.Errorf("the second index did not load the checkpoint: %+v", loaded.progress)
	}
	name := fmt.Sprintf("checkpoint of %d records + a tail of %d", loaded.progress.Covered, loaded.progress.Applied)
	covered := loaded.progress.Covered + loaded.progress.Applied
	rate := float64(covered) / loaded.took.Seconds()
	res.add(name, "records/s", round(rate, 1), rawRate)
	res.Rows = append(res.Rows, plainRow(name, "memories/s", round(float64(loaded.stats.Entries)/loaded.took.Seconds(), 1)))
	res.Rows = append(res.Rows, plainRow(name, "seconds", round(loaded.took.Seconds(), 2)))
	res.Rows = append(res.Rows, plainRow(name, "of them the checkpoint's load, s", round(loaded.progress.LoadedAt.Sub(loaded.progress.StartedAt).Seconds(), 2)))
	res.Rows = append(res.Rows, Row{Case: name, Metric: "1M records warm, extrapolated s", Loom: round(1e6/rate, 1),
		Gate: fmt.Sprintf("≤ 30 s: %s", passFail(1e6/rate <= 30))})
	res.Samples = append(res.Samples, CaseSamples{Case: name,
		Loom:     Sample{Calls: int(covered), Seconds: round(loaded.took.Seconds(), 2), PerSecond: round(rate, 1)},
		Baseline: &Sample{Calls: int(records), PerSecond: rawRate}})
	loaded.memoryRows(res, name)
	return nil
}

// quietOwnIndex waits until the process under test's own index is warm and its graph
// builds have finished, so neither shares the cores with what a scenario measures.
func (r *runner) quietOwnIndex(ctx context.Context) error {
	n := r.t.Process
	if err := settleOwnIndex(ctx, n.IndexHealth); err != nil {
		return err
	}
	if own := n.Index(); own != nil {
		own.Settle()
	}
	return nil
}

// settleOwnIndex waits until the process under test's own index is warm: a process
// started on a full topic replays it, and that replay and its graph builds would share
// the cores with the fresh indexes measured.
func settleOwnIndex(ctx context.Context, health func() (indexfeed.Health, bool)) error {
	deadline := time.Now().Add(coldstartTimeout)
	for {
		h, ok := health()
		if !ok || h.Warm {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the process's own index was not warm after %s: %+v", coldstartTimeout, h)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// plainRow is a row without a baseline.
func plainRow(caseName, metric string, v float64) Row {
	return Row{Case: caseName, Metric: metric, Loom: v}
}

// bareRead times a bare kgo read of the whole topic and returns its records/s; with
// res, the row of its time.
func (r *runner) bareRead(ctx context.Context, res *ScenarioResult, records int64) (float64, error) {
	r.progress("  bare read of %d records", records)
	start := time.Now()
	read, err := kafka.ReadTopic(ctx, r.t.Process.Cfg.Kafka.Brokers, r.t.Process.Cfg.Pipeline.Topic, func(*kgo.Record) {})
	if err != nil {
		return 0, err
	}
	took := time.Since(start)
	if res != nil {
		res.Rows = append(res.Rows, plainRow(fmt.Sprintf("bare read of %d records", read), "seconds", round(took.Seconds(), 2)))
	}
	return round(float64(read)/took.Seconds(), 1), nil
}

// warmed is one fresh index's warm-up.
type warmed struct {
	took, stopTook      time.Duration
	graphTook           time.Duration // the graph builds after the warm-up
	progress            indexfeed.Progress
	stats               searchindex.Stats
	heap, heapWithGraph int64
	graphNodes          int
	// cpuStart and cpuWarm are the CPU spent at the start and when warm.
	cpuStart, cpuWarm cpuMark
}

func (w warmed) rate() float64 { return float64(w.progress.Applied) / w.took.Seconds() }

// memoryRows reports the Go heap and the estimate per memory.
func (w warmed) memoryRows(res *ScenarioResult, name string) {
	if w.stats.Entries == 0 {
		return
	}
	per := func(b int64) float64 { return round(float64(b)/float64(w.stats.Entries), 0) }
	mem := fmt.Sprintf("%s: %d memories in %d namespaces", name, w.stats.Entries, w.stats.Namespaces)
	// At a few memories the heap's noise outweighs the index: a figure below zero says
	// nothing, so it is left out rather than passed.
	if w.heap > 0 {
		res.Rows = append(res.Rows, Row{Case: mem, Metric: "bytes/memory (Go heap added, at warm: its follower's fetches and the graph builds under way included)", Loom: per(w.heap)})
	}
	if w.heapWithGraph > 0 {
		res.Rows = append(res.Rows, Row{Case: mem + fmt.Sprintf(", %d graph nodes", w.graphNodes), Metric: "bytes/memory (Go heap added, graphs built, follower stopped)", Loom: per(w.heapWithGraph),
			Gate: fmt.Sprintf("≤ %d: %s", bytesPerMemoryGate, passFail(per(w.heapWithGraph) <= bytesPerMemoryGate))})
	}
	res.Rows = append(res.Rows,
		Row{Case: mem + ", graphs built", Metric: "bytes/memory (estimate)", Loom: per(w.stats.Bytes)},
		plainRow(mem, "graph builds after the warm-up, s", round(w.graphTook.Seconds(), 2)))
}

// warm runs a fresh index and follower with the checkpoint directory until warm, then
// measures its heap, lets its graph builds finish and measures again, and stops it (its
// checkpoint is written then).
func (r *runner) warm(ctx context.Context, dir string) (warmed, error) {
	n := r.t.Process
	cfg := n.Cfg
	var w warmed
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	x := searchindex.New(searchindex.Config{GraphMin: cfg.SearchIndex.GraphMin})
	defer x.Close()
	feed := indexfeed.New(indexfeed.Config{Brokers: cfg.Kafka.Brokers, Topic: cfg.Pipeline.Topic, BatchRecords: cfg.SearchIndex.BatchRecords,
		FetchMaxWait: cfg.SearchIndex.FetchMaxWait, MaxBytes: cfg.SearchIndex.MaxBytes, CheckpointDir: dir, CheckpointInterval: time.Hour, KEKs: n.Keys.IDs()}, n.PG, x, n.Log)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	w.cpuStart = r.cpuNow()
	start := time.Now()
	go func() { ran <- feed.Run(runCtx) }()
	select {
	case <-feed.Warmed():
	case err := <-ran:
		return w, fmt.Errorf("the index follower stopped before it was warm: %w", err)
	case <-time.After(coldstartTimeout):
		stop()
		<-ran
		return w, fmt.Errorf("the fresh index was not warm after %s: %+v", coldstartTimeout, feed.Progress())
	}
	w.took = time.Since(start)
	w.cpuWarm = r.cpuNow()
	heap := func() int64 {
		runtime.GC()
		runtime.ReadMemStats(&after)
		return int64(after.HeapAlloc) - int64(before.HeapAlloc)
	}
	w.heap = heap()
	building := time.Now()
	x.Settle()
	w.graphTook = time.Since(building)
	stopping := time.Now()
	stop()
	<-ran
	w.stopTook = time.Since(stopping)
	// Read with the follower stopped: what the index holds, not the fetch buffers of
	// its client or of the in-process broker serving it (kfake keeps a connection's last
	// response, megabytes after a replay's fetches).
	w.heapWithGraph = heap()
	w.stats = x.Stats()
	for _, sp := range w.stats.Spaces {
		w.graphNodes += sp.Graph
	}
	w.progress = feed.Progress()
	r.progress("    warm in %s: %d records applied, %d restored, %d memories, %d B/memory of heap (%d with graphs); stopped in %s",
		w.took.Round(time.Millisecond), w.progress.Applied, w.progress.Restored, w.stats.Entries,
		w.heap/max(w.stats.Entries, 1), w.heapWithGraph/max(w.stats.Entries, 1), w.stopTook.Round(time.Millisecond))
	return w, nil
}
