// Package indexfeed feeds the in-process search index from the revisions topic: it
// reads every partition from its start without a consumer group (each process keeps
// its own position), decodes each batch and opens its sealed content with the revision
// keys (internal/revisions: one Postgres query per batch, as the projector does), and
// applies the batch to the index namespace by namespace, in stream order. Erasures,
// redactions and destroyed keys reach the index as what they are, so a replay never
// brings back what they removed.
//
// A process warms by replaying the topic from its start: the index is a projection as
// replayable as ClickHouse's tables and needs no state of its own. With a checkpoint
// directory it warms faster: it loads the last checkpoint of the index with the
// offsets it stands for and tails the topic from them (checkpoint.go). Until it is warm
// the index's positions are behind the namespaces' generations, so a barrier waiting on
// them answers PROJECTION_BEHIND rather than serve a partial index. Graph builds wait
// until it is warm: one build per namespace over what the warm-up left.
package indexfeed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/kafka"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/revisions"
	"github.com/loomplane/loom/internal/searchindex"
	"github.com/loomplane/loom/internal/tracing"
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
	// CheckpointDir is where the follower keeps its checkpoint of the index; "" keeps
	// none (every start replays the topic).
	CheckpointDir string
	// CheckpointInterval is how often a checkpoint is written while records arrive
	// (default 5 minutes). One is also written at once after a batch that erased,
	// redacted or retired content (once the follower is warm), and when Run ends.
	CheckpointInterval time.Duration
	// KEKs are the ids of the KEKs the process's Postgres sessions open data keys with
	// (kek.Ring.IDs). A checkpoint records its writer's: a process that lacks one of them
	// replays the topic rather than serve content it could not open.
	KEKs [][]byte
	// Tracer traces the apply of each record a traced write queued, in that write's
	// trace (nil: not traced).
	Tracer trace.Tracer
	// Handoff holds the data keys this process's relay sealed records with: a batch's
	// keys found there are not read from Postgres (nil: every batch reads its keys).
	Handoff *revisions.Handoff
}

func (c Config) withDefaults() Config {
	if c.BatchRecords <= 0 {
		c.BatchRecords = 5000
	}
	if c.FetchMaxWait <= 0 {
		c.FetchMaxWait = 100 * time.Millisecond
	}
	if c.CheckpointInterval <= 0 {
		c.CheckpointInterval = 5 * time.Minute
	}
	c.Tracer = tracing.Tracer(c.Tracer)
	return c
}

// The stages of a batch marked on its records' process spans: its data keys read from
// Postgres, its content opened (the apply follows).
const (
	EventKeysRead = "keys read"
	EventOpened   = "opened"
)

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

	// The checkpoint: the topic's id, records applied since the last one, and whether
	// what they applied removed content the last one holds.
	topicID       [16]byte
	sinceWritten  int64
	removedSince  bool
	lastWrittenAt time.Time
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
	Evicted int64
	// Restored is how many memories the checkpoint the follower started from held, and
	// Covered how many records of the topic it stood for (0, 0: it replayed the topic);
	// RestoreRefused says why a checkpoint found was not used.
	Restored, Covered int64
	RestoreRefused    string
	// Checkpoints written, the last one's size and when, and the writes that failed.
	Checkpoints, CheckpointBytes, CheckpointFailures int64
	CheckpointAt                                     time.Time
	// LoadedAt is when the checkpoint was loaded (the tail starts there).
	LoadedAt      time.Time
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

// Run replays the topic into the index (from its checkpoint's offsets when it loads
// one, else from the start), then follows it, until ctx ends; a checkpoint is written
// then. Run it once per Follower; a restarted process builds a new index and follower.
func (f *Follower) Run(ctx context.Context) error {
	// The checkpoint is opened before the topic's offsets are read: one that another
	// process sharing the directory renames in later may stand past the ends read then,
	// and would be refused as written on a recreated topic.
	var ck foundCheckpoint
	if f.cfg.CheckpointDir != "" {
		removeCheckpoints(f.cfg.CheckpointDir, false)
		ck.file, ck.head, ck.size, ck.err = openCheckpoint(f.cfg.CheckpointDir)
		if ck.file != nil {
			defer ck.file.Close()
		}
	}
	admin, err := kafka.NewClient(f.cfg.Brokers)
	if err != nil {
		return err
	}
	adm := kadm.NewClient(admin)
	starts, ends, err := kafka.Span(ctx, adm, f.cfg.Topic)
	if err == nil && f.cfg.CheckpointDir != "" {
		// The topic's id tells a recreated topic from the one a checkpoint follows; a
		// broker that does not say it leaves the offsets' checks alone.
		if topics, lerr := adm.ListTopics(ctx, f.cfg.Topic); lerr == nil {
			f.topicID = topics[f.cfg.Topic].ID
		} else {
			f.log.Warn("index follower: could not read the topic's id", "topic", f.cfg.Topic, "err", lerr)
		}
	}
	admin.Close()
	if err != nil {
		return fmt.Errorf("index follower: %w", err)
	}
	if len(starts) == 0 {
		return fmt.Errorf("index follower: topic %s has no partitions (is it created?)", f.cfg.Topic)
	}
	f.index.Warming()
	f.mu.Lock()
	f.target, f.next, f.high = ends, map[int32]int64{}, map[int32]int64{}
	f.progress.StartedAt = time.Now()
	for p, start := range starts {
		f.next[p], f.high[p] = start, ends[p]
	}
	f.mu.Unlock()
	if f.cfg.CheckpointDir != "" {
		f.restore(ck, starts, ends)
	}
	from := map[int32]kgo.Offset{}
	f.mu.Lock()
	for p, next := range f.next {
		from[p] = kgo.NewOffset().At(next)
		f.progress.Target += ends[p] - next
	}
	f.lastWrittenAt = time.Now()
	f.markWarm()
	f.mu.Unlock()
	cl, err := kafka.NewClient(f.cfg.Brokers, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{f.cfg.Topic: from}),
		kgo.FetchMaxWait(f.cfg.FetchMaxWait))
	if err != nil {
		return err
	}
	defer cl.Close()
	// A batch is decoded and opened while the one before it is applied: the index
	// applies on one goroutine, and decoding is most of a replay's work.
	batches := make(chan *prepared, 1)
	go f.prepareBatches(ctx, cl, batches)
	for p := range batches {
		if len(p.recs) > 0 {
			f.apply(p)
		}
		f.mu.Lock()
		for part, h := range p.high {
			f.high[part] = max(f.high[part], h)
		}
		for _, r := range p.recs {
			f.next[r.Partition] = max(f.next[r.Partition], r.Offset+1)
		}
		f.progress.Applied += int64(len(p.recs))
		f.sinceWritten += int64(len(p.recs))
		f.progress.Behind = 0
		for part, h := range f.high {
			f.progress.Behind += max(h-f.next[part], 0)
		}
		if len(p.recs) > 0 {
			f.progress.LastAppliedAt = time.Now()
		}
		f.markWarm()
		f.mu.Unlock()
		f.checkpoint(false)
	}
	// ctx ended: the index stands at the offsets of the batches handed over, all applied.
	f.checkpoint(true)
	return nil
}

// prepared is a poll's records made ready to apply (decoded, their revisions' content
// opened, turned into the index's records), and the partitions' high watermarks the
// poll saw.
type prepared struct {
	recs        []*kgo.Record
	spans       tracing.RecordSpans // from the poll until the apply
	high        map[int32]int64
	undecodable int64
	spaces      *spaceRecords
	// Between the stages: the decoded batch and its data keys.
	batch *batch
	keys  map[string][]byte
}

// prepareBatches polls the topic and prepares each poll's records, in order, until ctx
// ends; then it closes out. Two stages, each on its own goroutine: one polls, decodes
// and reads the data keys (a Postgres round trip), the other opens the content; so the
// round trip of one poll overlaps the opening of the one before, and both overlap the
// apply of the one before that.
func (f *Follower) prepareBatches(ctx context.Context, cl *kgo.Client, out chan<- *prepared) {
	keyed := make(chan *prepared, 1)
	go f.fetchBatches(ctx, cl, keyed)
	defer close(out)
	for p := range keyed {
		if p.batch != nil {
			content, opened := p.batch.open(p.keys, func(u revisions.Unopened) {
				// The projector holds the namespace behind such a record until its repair; the
				// index serves nothing of it instead, so the namespace stays searchable.
				f.log.Error("index follower: a revision's data key does not open it; its content is not indexed", "record", u.Env.ID, "err", u.Err)
			})
			p.undecodable, p.spaces = p.batch.undecodable, p.batch.records(content, opened)
			p.batch, p.keys = nil, nil
			p.spans.Event(EventOpened)
		}
		select {
		case out <- p:
		case <-ctx.Done():
			return
		}
	}
}

// fetchBatches polls the topic, decodes each poll's records and reads their data keys,
// in order, until ctx ends; then it closes out.
func (f *Follower) fetchBatches(ctx context.Context, cl *kgo.Client, out chan<- *prepared) {
	defer close(out)
	for {
		fetches := cl.PollRecords(ctx, f.cfg.BatchRecords)
		if ctx.Err() != nil {
			return
		}
		fetches.EachError(func(topic string, p int32, err error) {
			f.log.Warn("index follower: fetch failed; retrying", "topic", topic, "partition", p, "err", err)
		})
		p := &prepared{recs: fetches.Records(), high: map[int32]int64{}}
		if tracing.On(f.cfg.Tracer) {
			p.spans = tracing.StartProcess(ctx, f.cfg.Tracer, "index", f.sinceStart(p.recs))
		}
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			p.high[fp.Partition] = max(p.high[fp.Partition], fp.HighWatermark)
		})
		if len(p.recs) > 0 {
			p.batch = decodeBatch(p.recs, func(r *kgo.Record, err error) {
				f.log.Error("index follower: skipping a record that is not a valid envelope", "partition", r.Partition, "offset", r.Offset, "err", err)
			})
			keys, err := f.keysWithRetry(ctx, p.batch)
			if err != nil {
				return // ctx ended
			}
			p.keys = keys
			p.spans.Event(EventKeysRead)
		}
		select {
		case out <- p:
		case <-ctx.Done():
			return
		}
	}
}

// sinceStart returns the records that reached the topic after Run started: the
// warm-up's (the topic's history, replayed at every start) do not join their old
// traces again.
func (f *Follower) sinceStart(recs []*kgo.Record) []*kgo.Record {
	var out []*kgo.Record
	for _, r := range recs {
		if r.Offset >= f.target[r.Partition] {
			out = append(out, r)
		}
	}
	return out
}

// foundCheckpoint is the checkpoint a start found (openCheckpoint): its file, positioned
// at the index's part, its head and that part's size; or why it could not be read.
type foundCheckpoint struct {
	file *os.File
	head checkpointHead
	size int64
	err  error
}

// restore loads the checkpoint found, when it can resume on the topic as it stands,
// and moves the partitions' next offsets to it. A checkpoint that cannot be used is
// deleted, with the reason logged: it may hold content erased since, and the replay
// writes a new one.
func (f *Follower) restore(ck foundCheckpoint, starts, ends map[int32]int64) {
	dir := f.cfg.CheckpointDir
	refuse := func(err error) {
		f.log.Warn("index follower: the index checkpoint is not used; replaying the topic from its start", "dir", dir, "why", err)
		removeCheckpoints(dir, true)
		f.mu.Lock()
		f.progress.RestoreRefused = err.Error()
		f.mu.Unlock()
	}
	file, head, size, err := ck.file, ck.head, ck.size, ck.err
	if errors.Is(err, errNoCheckpoint) {
		return
	}
	if err != nil {
		refuse(err)
		return
	}
	if err := head.usable(f.cfg.Topic, f.topicID, starts, ends); err != nil {
		refuse(err)
		return
	}
	if err := f.scope().admits(head.Scope); err != nil {
		refuse(err)
		return
	}
	if err := f.index.ReadCheckpoint(file, size); err != nil {
		refuse(err)
		return
	}
	st := f.index.Stats()
	f.mu.Lock()
	defer f.mu.Unlock()
	for p, next := range head.Next {
		f.progress.Covered += next - starts[p]
		f.next[p] = next
	}
	f.progress.Restored, f.progress.LoadedAt = st.Entries, time.Now()
	f.log.Info("index follower: loaded the index checkpoint; tailing the topic from its offsets", "dir", dir,
		"memories", st.Entries, "namespaces", st.Namespaces, "records", f.progress.Covered, "written_at", head.Written)
}

// checkpoint writes a checkpoint when one is due: the interval passed with records
// applied, or (once warm) a batch removed content the last one holds, or Run is ending
// (final) with anything applied since the last. Called between batches, so the index
// stands exactly at the offsets written.
func (f *Follower) checkpoint(final bool) {
	if f.cfg.CheckpointDir == "" {
		return
	}
	f.mu.Lock()
	due := f.sinceWritten > 0 && (final || time.Since(f.lastWrittenAt) >= f.cfg.CheckpointInterval) ||
		f.removedSince && (final || f.progress.Warm)
	if !due {
		f.mu.Unlock()
		return
	}
	head := checkpointHead{Topic: f.cfg.Topic, TopicID: f.topicID, Next: maps.Clone(f.next), Written: time.Now(), Scope: f.scope()}
	f.mu.Unlock()
	start := time.Now()
	size, err := writeCheckpoint(f.cfg.CheckpointDir, head, f.index)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastWrittenAt = time.Now()
	if err != nil {
		f.progress.CheckpointFailures++
		f.log.Error("index follower: writing the index checkpoint failed; the next start replays more of the topic", "dir", f.cfg.CheckpointDir, "err", err)
		return
	}
	f.sinceWritten, f.removedSince = 0, false
	f.progress.Checkpoints++
	f.progress.CheckpointBytes, f.progress.CheckpointAt = size, head.Written
	f.log.Debug("index follower: wrote the index checkpoint", "bytes", size, "took", time.Since(start))
}

// scope is what the follower's checkpoints are written under.
func (f *Follower) scope() checkpointScope {
	return checkpointScope{KEKs: f.cfg.KEKs, MaxBytes: f.cfg.MaxBytes}
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
	f.index.Warm()
	f.progress.Warm, f.progress.WarmAt = true, time.Now()
	close(f.warmed)
}

// keysWithRetry reads the data keys of a batch's revisions and the users of its
// erasures (revisions.ResolveRecordFences), waiting out Postgres
// however long: every namespace needs it, and the index must not skip a record.
func (f *Follower) keysWithRetry(ctx context.Context, b *batch) (map[string][]byte, error) {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval, bo.MaxInterval, bo.MaxElapsedTime = 100*time.Millisecond, 5*time.Second, 0
	handed, rest := f.cfg.Handoff.Take(b.revisions)
	for {
		err := revisions.ResolveRecordFences(ctx, f.keys, b.decoded)
		var keys map[string][]byte
		if err == nil && len(rest) > 0 {
			keys, err = revisions.FetchKeys(ctx, f.keys, rest)
		}
		if err == nil {
			if keys == nil {
				return handed, nil
			}
			maps.Copy(keys, handed)
			return keys, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		wait := bo.NextBackOff()
		f.log.Warn("index follower: batch failed; retrying", "records", len(b.decoded), "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// apply applies a prepared batch to the index and keeps within the memory budget.
func (f *Follower) apply(p *prepared) {
	done := p.spaces.applyTo(f.index)
	p.spans.EndAll(nil)
	var evicted []searchindex.Space
	if f.cfg.MaxBytes > 0 {
		if evicted = f.index.Enforce(f.cfg.MaxBytes); len(evicted) > 0 {
			f.log.Warn("index follower: past the memory budget; these namespaces are served from ClickHouse", "namespaces", evicted, "budget_bytes", f.cfg.MaxBytes)
		}
	}
	f.mu.Lock()
	f.progress.Undecodable += p.undecodable
	f.progress.Keyless += done.keyless
	f.progress.Unopenable += done.unopenable
	f.progress.Evicted += int64(len(evicted))
	f.removedSince = f.removedSince || done.removed
	f.mu.Unlock()
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

// applied is what applying a batch met: revisions whose key was gone, or did not open
// them, and whether it removed content (an erasure, a redaction, a revision whose key
// is gone).
type applied struct {
	keyless, unopenable int64
	removed             bool
}

// applyTo opens the batch's revisions with keys and applies the batch to the index,
// namespace by namespace, in stream order.
func (b *batch) applyTo(x *searchindex.Index, keys map[string][]byte, unopened func(revisions.Unopened)) applied {
	content, out := b.open(keys, unopened)
	return b.records(content, out).applyTo(x)
}

// open opens the batch's revisions with keys, by envelope (a pointer hashes in a
// word, a record id in its bytes); what it met is in applied.
func (b *batch) open(keys map[string][]byte, unopened func(revisions.Unopened)) (map[*events.Envelope]*events.Content, applied) {
	content := make(map[*events.Envelope]*events.Content, len(b.revisions))
	var out applied
	if len(b.revisions) > 0 {
		opened, bad, gone := revisions.OpenSearchableInPlace(b.revisions, keys)
		for _, o := range opened {
			content[o.Env] = o.Content
		}
		for _, u := range bad {
			unopened(u)
		}
		out.keyless, out.unopenable = int64(len(gone)), int64(len(bad))
		out.removed = len(gone) > 0
	}
	return content, out
}

// spaceRecords are a batch's records as the index applies them, by namespace in the
// order the batch first names each, with what opening and reading them met.
type spaceRecords struct {
	order   []searchindex.Space
	records map[searchindex.Space][]searchindex.Record
	met     applied
}

// records turns the batch, its revisions' content opened, into what the index applies;
// out is what opening it met.
func (b *batch) records(content map[*events.Envelope]*events.Content, out applied) *spaceRecords {
	sr := &spaceRecords{records: map[searchindex.Space][]searchindex.Record{}, met: out}
	for _, d := range b.decoded {
		sp := searchindex.Space{Org: d.Env.Org, Namespace: d.Env.Namespace}
		sr.met.removed = sr.met.removed || d.Kind == revisions.Erasure || d.Kind == revisions.Redaction
		if _, ok := sr.records[sp]; !ok {
			sr.order = append(sr.order, sp)
		}
		sr.records[sp] = append(sr.records[sp], recordOf(d, content))
	}
	return sr
}

// applyTo applies the records to the index, namespace by namespace, in stream order,
// and returns what opening and reading them met.
func (sr *spaceRecords) applyTo(x *searchindex.Index) applied {
	for _, sp := range sr.order {
		x.Apply(sp, sr.records[sp])
	}
	return sr.met
}

// recordOf turns a decoded record into what the index applies; a revision without
// opened content (its key gone, or not opening it) is applied sealed.
func recordOf(d revisions.Record, content map[*events.Envelope]*events.Content) searchindex.Record {
	rec := searchindex.Record{Seq: d.Env.Seq}
	switch d.Kind {
	case revisions.Erasure:
		rec.Jump = true
		if d.Fence != nil && !d.Fence.Unresolved() {
			rec.Erasure = &searchindex.Fence{UserID: d.Fence.UserID, Seq: d.Fence.Seq}
		}
	case revisions.Redaction:
		if x := d.Redacted; x != nil {
			rec.Redaction = &searchindex.Redaction{MemoryID: x.MemoryID, Versions: x.Versions}
		}
	case revisions.Revision:
		rec.Revision = revisionOf(d.Env, content[d.Env])
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
