package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/events"
)

// config is what the consumer is told on its command line.
type config struct {
	Brokers      []string
	Topic        string
	Group        string
	StateFile    string        // "" keeps the dedupe state in memory only
	API          string        // "" prints the plain fields only
	Token        string        // bearer token for API
	FetchTimeout time.Duration // per content fetch
}

// run follows the topic until ctx ends. Each poll's events are handled first, then the
// dedupe state is saved, then the offsets are committed: a crash anywhere delivers
// the events again, and the saved seqs turn them into duplicates.
func run(ctx context.Context, cfg config, out, errOut io.Writer) error {
	seen, err := loadSeen(cfg.StateFile)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.DisableAutoCommit(),
		// No rebalance between a poll and its commit, so a partition never moves to
		// another member with handled events left uncommitted.
		kgo.BlockRebalanceOnPoll(),
		// A new group starts at the oldest record: the topic is kept indefinitely.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close() // leaves the group, so a restart gets its partitions back at once
	h := &handler{seen: seen, out: out, held: map[string][]heldRecord{}}
	if cfg.API != "" {
		h.content = newContentReader(cfg.API, cfg.Token, cfg.FetchTimeout)
	}
	for {
		fetches := cl.PollRecords(ctx, 500)
		if ctx.Err() != nil {
			cl.AllowRebalance()
			return nil
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			fmt.Fprintf(errOut, "fetch %s[%d]: %v\n", topic, partition, err)
		})
		recs := fetches.Records()
		for _, r := range recs {
			h.handle(ctx, r)
		}
		if err := seen.save(); err != nil {
			cl.AllowRebalance()
			return err
		}
		// Offsets stop before a record held past a gap: a crash delivers it again.
		if done := h.settled(recs); len(done) > 0 {
			if err := cl.CommitRecords(ctx, done...); err != nil && ctx.Err() == nil {
				// Not fatal: the events come again and are deduplicated.
				fmt.Fprintf(errOut, "commit offsets: %v\n", err)
			}
		}
		cl.AllowRebalance()
	}
}

// handler turns records into one line each, in seq order per namespace.
type handler struct {
	seen    *seen
	content *contentReader
	out     io.Writer
	// held are records that arrived past a gap, per namespace (events.RecordKey):
	// handled once the missing seqs arrive, or an erasure's record says they never will.
	held map[string][]heldRecord
}

type heldRecord struct {
	env       *events.Envelope
	partition int32
	offset    int64
}

func (h *handler) handle(ctx context.Context, r *kgo.Record) {
	env, err := events.Decode(r.Value)
	if err != nil {
		// A record that is not an envelope will never become one: skip it rather than
		// stall the partition behind it.
		fmt.Fprintf(h.out, "skip partition=%d offset=%d: %v\n", r.Partition, r.Offset, err)
		return
	}
	ns := string(events.RecordKey(env.Org, env.Namespace))
	switch last := h.seen.last(env.Org, env.Namespace); {
	case env.Seq <= last:
		return // a redelivery: already handled
	case last > 0 && env.Seq > last+1 && env.Type != events.TypeErased:
		// The missing seqs arrive later (Loom publishes a namespace's records again
		// after one it could not publish), or an erasure withdrew them and its record
		// follows: hold this one until then. A gap that never fills means records were
		// lost from the topic (see docs/events.md: loomd republish).
		fmt.Fprintf(h.out, "gap %s: seqs %d..%d not seen yet; holding seq %d\n", ns, last+1, env.Seq-1, env.Seq)
		h.held[ns] = append(h.held[ns], heldRecord{env: env, partition: r.Partition, offset: r.Offset})
		return
	}
	// An erasure's record follows every seq below it that will ever arrive: the held
	// records below it come first, in seq order.
	if env.Type == events.TypeErased {
		h.release(ctx, ns, func(seq int64) bool { return seq < env.Seq })
	}
	h.emit(ctx, env)
	h.release(ctx, ns, func(seq int64) bool { return seq == h.seen.last(env.Org, env.Namespace)+1 })
}

// release handles, in seq order, the held records of a namespace that ready admits,
// for as long as it admits the next one.
func (h *handler) release(ctx context.Context, ns string, ready func(seq int64) bool) {
	held := h.held[ns]
	sort.Slice(held, func(i, j int) bool { return held[i].env.Seq < held[j].env.Seq })
	for len(held) > 0 && ready(held[0].env.Seq) {
		e := held[0].env
		held = held[1:]
		if e.Seq > h.seen.last(e.Org, e.Namespace) {
			h.emit(ctx, e)
		}
	}
	h.held[ns] = held
}

func (h *handler) emit(ctx context.Context, env *events.Envelope) {
	line := describe(env)
	if h.content != nil && env.Revision != nil && !env.Revision.Tombstone && env.Type != events.TypeRedacted {
		line += " " + h.content.describe(ctx, env)
	}
	fmt.Fprintln(h.out, line)
	h.seen.mark(env.Org, env.Namespace, env.Seq)
}

// settled are the records whose offsets may be committed: those before the first
// record still held in their partition.
func (h *handler) settled(recs []*kgo.Record) []*kgo.Record {
	first := map[int32]int64{}
	for _, held := range h.held {
		for _, r := range held {
			if o, ok := first[r.partition]; !ok || r.offset < o {
				first[r.partition] = r.offset
			}
		}
	}
	var out []*kgo.Record
	for _, r := range recs {
		if o, ok := first[r.Partition]; !ok || r.Offset < o {
			out = append(out, r)
		}
	}
	return out
}

// describe prints an event's plain fields: what every consumer may read. The user is
// named by user_ref, a keyed digest (envelope version 2 on); a record written before
// named them by user_id.
func describe(e *events.Envelope) string {
	s := fmt.Sprintf("%s %s committed_at=%s", e.ID, e.Type, e.CommittedAt.Format(time.RFC3339Nano))
	if r := e.Revision; r != nil {
		s += fmt.Sprintf(" memory_id=%s version=%d status=%s tombstone=%t user=%s",
			r.MemoryID, r.Version, r.Status, r.Tombstone, userOf(r.UserRef, r.UserID))
	}
	if x := e.Redaction; x != nil {
		s += fmt.Sprintf(" redacted_versions=%v", x.Versions)
	}
	if x := e.Erasure; x != nil {
		s += fmt.Sprintf(" erasure=%s scope=%s user=%s withdrawn=%d", x.ID, x.Scope, userOf(x.UserRef, x.UserID), x.Withdrawn)
	}
	return s
}

// userOf shows a user: the first 12 digits of its reference, or a version 1 record's id.
func userOf(ref, id string) string {
	if len(ref) >= 12 {
		return "ref:" + ref[:12]
	}
	return fmt.Sprintf("id:%q", id)
}
