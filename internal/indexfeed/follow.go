// Package indexfeed feeds the in-process search index from the revisions topic: it
// reads every partition from its start without a consumer group (each process keeps
// its own position), decodes each batch and opens its sealed content with the revision
// keys (internal/revisions: one Postgres query per batch, as the projector does), and
// applies the batch to the index namespace by namespace, in stream order. Erasures,
// redactions and destroyed keys reach the index as what they are, so a replay never
// brings back what they removed.
//
// A process warms by replaying the topic from its start: the index is a projection as
// replayable as ClickHouse's tables and needs no state of its own. Until it is warm the
// index's positions are behind the namespaces' generations, so a barrier waiting on
// them answers PROJECTION_BEHIND rather than serve a partial index.
package indexfeed

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/kafka"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/revisions"
	"github.com/loomplane/loom/internal/searchindex"
)

// Config tunes a follower.
type Config struct {
	Brokers []string
	Topic   string
	// BatchRecords is how many records one poll applies at most (default 5000).
	BatchRecords int
	// FetchMaxWait is how long a fetch waits for records to arrive (default 100 ms);
	// a fetch answers as soon as any arrive.
	FetchMaxWait time.Duration
	// MaxBytes is the index's memory budget: past it, after a batch, the coldest
	// namespaces are evicted (searchindex.Index.Enforce). 0: no budget.
	MaxBytes int64
}

func (c Config) withDefaults() Config {
	if c.BatchRecords <= 0 {
		c.BatchRecords = 5000
	}
	if c.FetchMaxWait <= 0 {
		c.FetchMaxWait = 100 * time.Millisecond
	}
	return c
}

// Follower applies the topic to an index.
type Follower struct {
	cfg   Config
	keys  revisions.Querier
	index *searchindex.Index
	log   *slog.Logger

	mu       sync.Mutex
	progress Progress
	target   map[int32]int64 // end offsets when Run started: the warm-up
	next     map[int32]int64 // the next offset to apply, per partition
	high     map[int32]int64 // high watermarks as of the last fetch
	warmed   chan struct{}
}

// New returns a follower that reads data keys through keys (a Postgres pool).
func New(cfg Config, keys revisions.Querier, index *searchindex.Index, log *slog.Logger) *Follower {
	return &Follower{cfg: cfg.withDefaults(), keys: keys, index: index, log: log, warmed: make(chan struct{})}
}

// Progress is what a follower has done.
type Progress struct {
	Warm bool // it applied every record the topic held when it started
	// Target is how many records the topic held when it started; Applied how many it
	// has applied since.
	Target, Applied int64
	// Behind is the records on the topic past those applied, as of the last fetch.
	Behind int64
	// Undecodable records were skipped; Keyless revisions' data keys were gone
	// (redacted, erased); Unopenable ones' keys did not open them (damaged). Neither
	// kind's content reaches the index.
	Undecodable, Keyless, Unopenable int64
	// Evicted namespaces were dropped to keep within MaxBytes.
	Evicted       int64
	StartedAt     time.Time
	WarmAt        time.Time
	LastAppliedAt time.Time
}

// Progress reports the follower's progress.
func (f *Follower) Progress() Progress {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.progress
}

// Warmed is closed once the follower is warm.
func (f *Follower) Warmed() <-chan struct{} { return f.warmed }

// Run replays the topic from its start into the index, then follows it, until ctx ends.
// Run it once per Follower; a restarted process builds a new index and follower.
func (f *Follower) Run(ctx context.Context) error {
	admin, err := kafka.NewClient(f.cfg.Brokers)
	if err != nil {
		return err
	}
	starts, ends, err := kafka.Span(ctx, kadm.NewClient(admin), f.cfg.Topic)
	admin.Close()
	if err != nil {
		return fmt.Errorf("index follower: %w", err)
	}
	if len(starts) == 0 {
		return fmt.Errorf("index follower: topic %s has no partitions (is it created?)", f.cfg.Topic)
	}
	from := map[int32]kgo.Offset{}
	f.mu.Lock()
	f.target, f.next, f.high = ends, map[int32]int64{}, map[int32]int64{}
	f.progress.StartedAt = time.Now()
	for p, start := range starts {
		from[p] = kgo.NewOffset().At(start)
		f.next[p], f.high[p] = start, ends[p]
		f.progress.Target += ends[p] - start
	}
	f.markWarm()
	f.mu.Unlock()
	cl, err := kafka.NewClient(f.cfg.Brokers, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{f.cfg.Topic: from}),
		kgo.FetchMaxWait(f.cfg.FetchMaxWait))
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fetches := cl.PollRecords(ctx, f.cfg.BatchRecords)
		if ctx.Err() != nil {
			return nil
		}
		fetches.EachError(func(topic string, p int32, err error) {
			f.log.Warn("index follower: fetch failed; retrying", "topic", topic, "partition", p, "err", err)
		})
		recs := fetches.Records()
		if len(recs) > 0 {
			if err := f.applyWithRetry(ctx, recs); err != nil {
				return nil // ctx ended
			}
		}
		f.mu.Lock()
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			f.high[p.Partition] = max(f.high[p.Partition], p.HighWatermark)
		})
		for _, r := range recs {
			f.next[r.Partition] = max(f.next[r.Partition], r.Offset+1)
		}
		f.progress.Applied += int64(len(recs))
		f.progress.Behind = 0
		for p, h := range f.high {
			f.progress.Behind += max(h-f.next[p], 0)
		}
		if len(recs) > 0 {
			f.progress.LastAppliedAt = time.Now()
		}
		f.markWarm()
		f.mu.Unlock()
	}
}

// markWarm closes warmed once every partition reached its target. Holding mu.
func (f *Follower) markWarm() {
	if f.progress.Warm {
		return
	}
	for p, end := range f.target {
		if f.next[p] < end {
			return
		}
	}
	f.progress.Warm, f.progress.WarmAt = true, time.Now()
	close(f.warmed)
}

// applyWithRetry applies a batch, waiting out Postgres (the keys) however long: every
// namespace needs it, and the index must not skip a record.
func (f *Follower) applyWithRetry(ctx context.Context, recs []*kgo.Record) error {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval, bo.MaxInterval, bo.MaxElapsedTime = 100*time.Millisecond, 5*time.Second, 0
	for {
		err := f.apply(ctx, recs)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := bo.NextBackOff()
		f.log.Warn("index follower: batch failed; retrying", "records", len(recs), "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// apply decodes a batch, opens its revisions and applies it to the index.
func (f *Follower) apply(ctx context.Context, recs []*kgo.Record) error {
	batch := decodeBatch(recs, func(r *kgo.Record, err error) {
		f.log.Error("index follower: skipping a record that is not a valid envelope", "partition", r.Partition, "offset", r.Offset, "err", err)
	})
	var keys map[string][]byte
	if len(batch.revisions) > 0 {
		var err error
		if keys, err = revisions.FetchKeys(ctx, f.keys, batch.revisions); err != nil {
			return err
		}
	}
	done := batch.applyTo(f.index, keys, func(u revisions.Unopened) {
		// The projector holds the namespace behind such a record until its repair; the
		// index serves nothing of it instead, so the namespace stays searchable.
		f.log.Error("index follower: a revision's data key does not open it; its content is not indexed", "record", u.Env.ID, "err", u.Err)
	})
	var evicted []searchindex.Space
	if f.cfg.MaxBytes > 0 {
		if evicted = f.index.Enforce(f.cfg.MaxBytes); len(evicted) > 0 {
			f.log.Warn("index follower: past the memory budget; these namespaces are served from ClickHouse", "namespaces", evicted, "budget_bytes", f.cfg.MaxBytes)
		}
	}
	f.mu.Lock()
	f.progress.Undecodable += batch.undecodable
	f.progress.Keyless += done.keyless
	f.progress.Unopenable += done.unopenable
	f.progress.Evicted += int64(len(evicted))
	f.mu.Unlock()
	return nil
}

// batch is a poll's records decoded, with the revisions among them whose content the
// keys open.
type batch struct {
	decoded     []revisions.Record
	revisions   []*events.Envelope
	undecodable int64
}

func decodeBatch(recs []*kgo.Record, undecodable func(*kgo.Record, error)) *batch {
	b := &batch{}
	b.decoded = revisions.Decode(recs, func(r *kgo.Record, err error) {
		b.undecodable++
		undecodable(r, err)
	})
	for _, d := range b.decoded {
		if d.Kind == revisions.Revision {
			b.revisions = append(b.revisions, d.Env)
		}
	}
	return b
}

// applied is what applying a batch met: revisions whose key was gone, or did not open them.
type applied struct{ keyless, unopenable int64 }

// applyTo opens the batch's revisions with keys and applies the batch to the index,
// namespace by namespace, in stream order.
func (b *batch) applyTo(x *searchindex.Index, keys map[string][]byte, unopened func(revisions.Unopened)) applied {
	content := map[string]*events.Content{}
	var out applied
	if len(b.revisions) > 0 {
		opened, bad, gone := revisions.Open(b.revisions, keys)
		for _, o := range opened {
			content[o.Env.ID] = o.Content
		}
		for _, u := range bad {
			unopened(u)
		}
		out.keyless, out.unopenable = int64(len(gone)), int64(len(bad))
	}
	bySpace := map[searchindex.Space][]searchindex.Record{}
	var order []searchindex.Space
	for _, d := range b.decoded {
		sp := searchindex.Space{Org: d.Env.Org, Namespace: d.Env.Namespace}
		if _, ok := bySpace[sp]; !ok {
			order = append(order, sp)
		}
		bySpace[sp] = append(bySpace[sp], recordOf(d, content))
	}
	for _, sp := range order {
		x.Apply(sp, bySpace[sp])
	}
	return out
}

// recordOf turns a decoded record into what the index applies; a revision without
// opened content (its key gone, or not opening it) is applied sealed.
func recordOf(d revisions.Record, content map[string]*events.Content) searchindex.Record {
	rec := searchindex.Record{Seq: d.Env.Seq}
	switch d.Kind {
	case revisions.Erasure:
		rec.Jump = true
		if d.Fence != nil {
			rec.Erasure = &searchindex.Fence{UserID: d.Fence.UserID, Seq: d.Fence.Seq}
		}
	case revisions.Redaction:
		if x := d.Redacted; x != nil {
			rec.Redaction = &searchindex.Redaction{MemoryID: x.MemoryID, Versions: x.Versions}
		}
	case revisions.Revision:
		rec.Revision = revisionOf(d.Env, content[d.Env.ID])
	}
	return rec
}

func revisionOf(env *events.Envelope, c *events.Content) *searchindex.Revision {
	v := env.Revision
	r := &searchindex.Revision{Seq: env.Seq, MemoryID: v.MemoryID, Version: v.Version, Agent: v.Agent, UserID: v.UserID,
		SessionID: v.SessionID, MemoryType: v.MemoryType, Status: v.Status, Sensitivity: v.Sensitivity, Tombstone: v.Tombstone,
		Pinned: v.Pinned, ContentSHA256: v.ContentSHA256, ExpiresAt: v.ExpiresAt, ValidTo: v.ValidTo, UpdatedAt: v.UpdatedAt,
		EmbeddingDim: v.EmbeddingDim}
	if c == nil {
		r.Sealed = true
		return r
	}
	r.MemoryKey, r.Text, r.Tags, r.Vector = c.MemoryKey, memrow.ValueText(c.Value), c.Tags, c.Embedding
	if len(c.ChunkEmbeddings) > 0 {
		r.ChunkVectors = make([][]float32, len(c.ChunkEmbeddings))
		for i, v := range c.ChunkEmbeddings {
			r.ChunkVectors[i] = v
		}
	}
	return r
}
