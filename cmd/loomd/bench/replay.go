package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/kafka"
	"github.com/loomplane/loom/projector"
)

// replayTimeout bounds the replay of the whole topic.
const replayTimeout = 30 * time.Minute

// restSample is how long the replay scenario samples ClickHouse's CPU at rest.
const restSample = 5 * time.Second

// replay measures a projector reset to earliest: the serving projection replays the
// whole topic into ClickHouse (every table, watermarks, offset commits), timed from
// the reset until its group has committed the topic's end offsets of the moment of
// the reset. The baseline reads the same records with a bare kgo consumer.
func (r *runner) replay(ctx context.Context) (*ScenarioResult, error) {
	n := r.t.Process
	topic, group := n.Cfg.Pipeline.Topic, projector.Group(n.Cfg.Pipeline.Projection)
	res := &ScenarioResult{
		Title: "projector reset to earliest: replayed records/s",
		Baseline: "a bare kgo read of the same topic from start to end: no consumer group, no decoding, " +
			"no ClickHouse (internal/kafka.ReadTopic)",
		Notes: []string{"the reset goes through POST /v1/admin/projections/{name}:reset, which pauses this process's projector, " +
			"moves its group's offsets and starts it again; the topic holds every revision of the run so far; " +
			"the process's own index is warm and its graph builds finished before the timed window"},
	}
	cl, err := kafka.NewClient(n.Cfg.Kafka.Brokers)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	records, ends, err := r.replayReady(ctx, adm, topic, group)
	if err != nil {
		return nil, err
	}
	// Both processes spend CPU at rest too (ClickHouse's merges and logs, this
	// process's workers and broker): their rates over a few idle seconds before the
	// replay tell that share from the replay's.
	rest := r.restRate(restSample)
	// Merges the earlier scenarios left (ClickHouse's own work, not the replay's) would
	// share the cores with it: they are waited out, and both rates at rest reported.
	settled, mergeWait, err := r.settleMerges(ctx, rest)
	if err != nil {
		return nil, err
	}

	r.progress("  bare read of %d records", records)
	start := time.Now()
	read, err := kafka.ReadTopic(ctx, n.Cfg.Kafka.Brokers, topic, func(*kgo.Record) {})
	if err != nil {
		return nil, err
	}
	rawTook := time.Since(start)
	r.progress("    %d records in %s", read, rawTook.Round(time.Millisecond))

	r.progress("  reset %s to earliest and replay %d records", group, records)
	run, err := r.timedReplay(ctx, adm, topic, group, ends)
	if err != nil {
		return nil, err
	}
	r.progress("    replayed in %s, %.0f batches", run.took.Round(time.Millisecond), run.batches)
	if run.batches > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("the replay took %.0f projector batches, %.0f records each on average "+
			"(at most LOOM_PROJECTOR_REPLAY_BATCH_ROWS %d while the backlog fills LOOM_PROJECTOR_BATCH_ROWS %d; "+
			"at most 1000 / LOOM_PG_PUBLISH_INTERVAL_MS (%d ms) batches a second)",
			run.batches, float64(records)/run.batches, max(n.Cfg.Projector.ReplayBatchRows, n.Cfg.Projector.BatchRows), n.Cfg.Projector.BatchRows,
			n.Cfg.Projector.Interval.Milliseconds()))
	}
	name := fmt.Sprintf("%d records", records)
	loomRate, rawRate := round(float64(records)/run.took.Seconds(), 1), round(float64(read)/rawTook.Seconds(), 1)
	res.add(name, "records/s", loomRate, rawRate)
	res.add(name, "seconds", round(run.took.Seconds(), 2), round(rawTook.Seconds(), 2))
	r.cpuRows(res, name, run.cpuBefore, run.cpuAfter, float64(records), "records")
	rest.rows(res, name)
	if mergeWait > 0 {
		res.Rows = append(res.Rows, plainRow(name, "waited for ClickHouse's merges to finish before the bare read, s", round(mergeWait.Seconds(), 2)))
		if settled.clickhouse >= 0 {
			res.Rows = append(res.Rows, plainRow(name, "CPU s per s at rest, merges finished: ClickHouse", round(settled.clickhouse, 3)))
		}
		res.Notes = append(res.Notes, "ClickHouse was merging what the earlier scenarios wrote when the replay was ready: the scenario "+
			"waited until system.merges was empty before the bare read and the replay (the wait is not in either figure)")
	}
	res.Samples = append(res.Samples, CaseSamples{Case: name,
		Loom:     Sample{Calls: int(records), Seconds: round(run.took.Seconds(), 2), PerSecond: loomRate},
		Baseline: &Sample{Calls: int(read), Seconds: round(rawTook.Seconds(), 2), PerSecond: rawRate}})
	return res, nil
}

// replayReady fills the topic to the scenario's size, waits for the projection to
// commit its end (the replay then starts from a quiet projection) and for the process's
// own index to settle, and answers the topic's records and end offsets.
func (r *runner) replayReady(ctx context.Context, adm *kadm.Client, topic, group string) (int64, map[int32]int64, error) {
	records, _, err := topicSpan(ctx, adm, topic)
	if err != nil {
		return 0, nil, err
	}
	if short := int64(r.opts.ReplayRevisions) - records; short > 0 {
		ns := r.namespace("replay")
		if err := r.appendOnly(ctx, ns); err != nil {
			return 0, nil, err
		}
		if err := r.load(ctx, ns, int(short)); err != nil {
			return 0, nil, err
		}
	}
	records, ends, err := topicSpan(ctx, adm, topic)
	if err != nil {
		return 0, nil, err
	}
	if err := r.waitUntil(ctx, "the projection to commit the topic's end", 5*time.Minute, 50*time.Millisecond, func(ctx context.Context) (bool, error) {
		return groupReached(ctx, adm, group, topic, ends)
	}); err != nil {
		return 0, nil, err
	}
	// The process under test warmed its own index from the topic as it started, and
	// builds its namespaces' graphs after: those builds would share the cores with the
	// replay measured (half a core, in a replay of 30,000 records).
	if err := r.quietOwnIndex(ctx); err != nil {
		return 0, nil, err
	}
	return records, ends, nil
}

// replayRun is what the timed replay measured.
type replayRun struct {
	took                time.Duration
	batches             float64 // projector batches the replay took
	cpuBefore, cpuAfter cpuMark
}

// timedReplay resets the projection to earliest and times it until its group has
// committed ends.
func (r *runner) timedReplay(ctx context.Context, adm *kadm.Client, topic, group string, ends map[int32]int64) (replayRun, error) {
	var run replayRun
	batchesBefore, err := r.projectorBatches(ctx)
	if err != nil {
		return run, err
	}
	run.cpuBefore = r.cpuNow()
	start := time.Now()
	if err := r.resetToEarliest(ctx); err != nil {
		return run, err
	}
	if err := r.waitUntil(ctx, "the replay to commit the topic's end", replayTimeout, 50*time.Millisecond, func(ctx context.Context) (bool, error) {
		return groupReached(ctx, adm, group, topic, ends)
	}); err != nil {
		return run, err
	}
	run.took = time.Since(start)
	run.cpuAfter = r.cpuNow()
	batchesAfter, err := r.projectorBatches(ctx)
	if err != nil {
		return run, err
	}
	run.batches = batchesAfter - batchesBefore
	return run, nil
}

// resetToEarliest resets the serving projection to the topic's start with an operator
// token, as an operator would, and checks the process under test runs its projector.
func (r *runner) resetToEarliest(ctx context.Context) error {
	n := r.t.Process
	// The reset is the deployment operator's control: no org token reaches it.
	secret, _, err := n.Tokens.Create(ctx, auth.NewToken{Role: auth.RoleOperator, Name: "loomd bench replay"})
	if err != nil {
		return fmt.Errorf("create the operator token the reset takes: %w", err)
	}
	operator, err := newClient(r.t.URL, secret)
	if err != nil {
		return err
	}
	reset, err := operator.ResetProjection(ctx, n.Cfg.Pipeline.Projection, client.ResetRequest{To: "earliest", Execute: true})
	if err != nil {
		return fmt.Errorf("reset the projection (its projector must run in the process under test, as in loomd dev): %w", err)
	}
	if !reset.Executed || !reset.PausedHere {
		return fmt.Errorf("the reset answered executed=%v paused_here=%v: the projection's projector does not run in the process under test",
			reset.Executed, reset.PausedHere)
	}
	return nil
}

// topicSpan counts the records a topic holds and returns its end offsets.
func topicSpan(ctx context.Context, adm *kadm.Client, topic string) (int64, map[int32]int64, error) {
	starts, ends, err := kafka.Span(ctx, adm, topic)
	if err != nil {
		return 0, nil, err
	}
	var records int64
	for p, end := range ends {
		records += end - starts[p]
	}
	return records, ends, nil
}

// groupReached says whether group has committed at least ends on every partition.
func groupReached(ctx context.Context, adm *kadm.Client, group, topic string, ends map[int32]int64) (bool, error) {
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return false, fmt.Errorf("fetch the offsets of %s: %w", group, err)
	}
	for p, end := range ends {
		if end == 0 {
			continue
		}
		c, ok := committed.Lookup(topic, p)
		if !ok || c.Err != nil || c.At < end {
			return false, nil
		}
	}
	return true, nil
}

// busyAtRest is ClickHouse's CPU at rest (CPU seconds a second) above which the replay
// waits for its merges to finish.
const busyAtRest = 0.1

// settleMerges waits, when ClickHouse was busy at rest, until it runs no merge (at most
// replayTimeout), and answers its rate at rest after that and how long it waited (0:
// it was not busy).
func (r *runner) settleMerges(ctx context.Context, rest restRate) (restRate, time.Duration, error) {
	if rest.clickhouse < busyAtRest {
		return rest, 0, nil
	}
	conn, start := r.t.Process.CH, time.Now()
	r.progress("  ClickHouse spent %.2f CPU s a second at rest: waiting for its merges", rest.clickhouse)
	err := r.waitUntil(ctx, "ClickHouse's merges to finish", replayTimeout, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		var merges uint64
		if err := conn.QueryRow(conn.Ctx(ctx), `SELECT count() FROM system.merges`).Scan(&merges); err != nil {
			return false, fmt.Errorf("count ClickHouse's merges: %w", err)
		}
		return merges == 0, nil
	})
	if err != nil {
		return rest, 0, err
	}
	waited := time.Since(start)
	return r.restRate(restSample), waited, nil
}
