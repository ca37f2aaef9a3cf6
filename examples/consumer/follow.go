package main

import (
	"context"
	"fmt"
	"io"
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
	h := &handler{seen: seen, out: out}
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
		if len(recs) > 0 {
			if err := cl.CommitRecords(ctx, recs...); err != nil && ctx.Err() == nil {
				// Not fatal: the events come again and are deduplicated.
				fmt.Fprintf(errOut, "commit offsets: %v\n", err)
			}
		}
		cl.AllowRebalance()
	}
}

// handler turns records into one line each.
type handler struct {
	seen    *seen
	content *contentReader
	out     io.Writer
}

func (h *handler) handle(ctx context.Context, r *kgo.Record) {
	env, err := events.Decode(r.Value)
	if err != nil {
		// A record that is not an envelope will never become one: skip it rather than
		// stall the partition behind it.
		fmt.Fprintf(h.out, "skip partition=%d offset=%d: %v\n", r.Partition, r.Offset, err)
		return
	}
	switch last := h.seen.last(env.Org, env.Namespace); {
	case env.Seq <= last:
		return // a redelivery: already handled
	case last > 0 && env.Seq > last+1:
		// Loom publishes a namespace's records again after one it could not publish,
		// so the missing seqs arrive, followed by this one once more: hold it until then.
		// A gap that never fills means records were lost from the topic (see
		// docs/events.md: loomd republish).
		fmt.Fprintf(h.out, "gap %s/%s: seqs %d..%d not seen yet; holding seq %d\n", env.Org, env.Namespace, last+1, env.Seq-1, env.Seq)
		return
	}
	line := describe(env)
	if h.content != nil && env.Revision != nil && !env.Revision.Tombstone {
		line += " " + h.content.describe(ctx, env)
	}
	fmt.Fprintln(h.out, line)
	h.seen.mark(env.Org, env.Namespace, env.Seq)
}

// describe prints an event's plain fields: what every consumer may read.
func describe(e *events.Envelope) string {
	s := fmt.Sprintf("%s %s committed_at=%s", e.ID, e.Type, e.CommittedAt.Format(time.RFC3339Nano))
	if r := e.Revision; r != nil {
		s += fmt.Sprintf(" memory_id=%s version=%d status=%s tombstone=%t sha256=%s",
			r.MemoryID, r.Version, r.Status, r.Tombstone, r.ContentSHA256[:12])
	}
	return s
}
