package command

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/outbox"
	"github.com/loomplane/loom/internal/periodic"
	"github.com/loomplane/loom/internal/pg"
)

// Usage publication (memory-architecture, "Background passes", usage_fold). memory.touch,
// search's served hits and evidence events are counted per memory in
// loom.memory_touches (touches_store.go: one upsert a touch, one a second for search's
// hits), not committed one by one: a record per search hit would put an outbox row on
// the read path. Every LOOM_USAGE_PUBLISH_INTERVAL_MS the command role publishes what
// was counted (search recalls alone once LOOM_USAGE_RECALL_INTERVAL_MS old,
// touches_store.go's usageDue) as one memory.usage_recorded record per namespace (at most
// events.MaxUsageItems memories a record): in one transaction it takes the namespace's
// next seq, takes the counts out of the table and queues their record (kept for a
// republish, as the other records that carry no revision are), so a count is published
// exactly once, whichever process publishes and wherever it stops. The usage_fold pass
// is a consumer of the topic that folds each record into the rows' counters
// (workers/usage_fold.go). A namespace never written, which no count can name a live
// row of, has its counts dropped.

// usageNamespacesPerRound bounds the namespaces one round publishes; the rest wait
// for the next round, oldest counts first.
const usageNamespacesPerRound = 200

// usageRecordsPerNamespace bounds the records one round publishes of a namespace.
const usageRecordsPerNamespace = 10

// usagePublishWait bounds one namespace's publication.
const usagePublishWait = 10 * time.Second

// RunUsagePublish publishes the counted usage every interval until ctx ends.
func (s *Service) RunUsagePublish(ctx context.Context, interval time.Duration) {
	periodic.Every(ctx, interval, func() {
		if n, err := s.PublishUsage(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("usage: publishing the counted usage failed; it stays counted", "err", err)
		} else if n > 0 {
			s.usageRecords.Add(float64(n))
		}
	})
}

// PublishUsage publishes the usage counted so far, one record per namespace (more for
// one past events.MaxUsageItems memories), and returns how many records it queued.
func (s *Service) PublishUsage(ctx context.Context) (int, error) {
	spaces, err := s.usageNamespaces(ctx, usageNamespacesPerRound)
	if err != nil {
		return 0, err
	}
	records := 0
	for _, sp := range spaces {
		for i := 0; i < usageRecordsPerNamespace; i++ {
			n, err := s.publishNamespaceUsage(ctx, sp[0], sp[1])
			if err != nil {
				return records, fmt.Errorf("publish the usage of %s/%s: %w", sp[0], sp[1], err)
			}
			if n > 0 {
				records++
			}
			if n < events.MaxUsageItems {
				break
			}
		}
	}
	if records > 0 && s.relayWake != nil {
		s.relayWake.Queued()
	}
	return records, nil
}

// publishNamespaceUsage publishes one record of a namespace's counts, in a
// transaction of its own, and returns how many memories it counts (0: nothing was
// counted, or the namespace was never written, and nothing was queued).
func (s *Service) publishNamespaceUsage(ctx context.Context, org, ns string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, usagePublishWait)
	defer cancel()
	var n int
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		n = 0
		// The generation's lock first: it orders the record among the namespace's
		// commits, and a second publisher of the namespace waits here, then finds the
		// counts taken. The seq is drawn only once there is a record to carry it: a seq
		// committed without its record is a gap the projection's watermark waits at for
		// ever (two command processes publishing one namespace left one, and every read
		// of the namespace that waits for ClickHouse was then PROJECTION_BEHIND).
		_, err := generations.Lock(ctx, tx, org, ns)
		unwritten := errors.Is(err, generations.ErrUnwritten)
		if err != nil && !unwritten {
			return fmt.Errorf("lock the namespace's generation: %w", err)
		}
		items, err := takeUsage(ctx, tx, org, ns, events.MaxUsageItems, s.cfg.RecallPublishInterval)
		if err != nil || len(items) == 0 || unwritten {
			return err
		}
		seq, err := generations.Bump(ctx, tx, org, ns)
		if err != nil {
			return fmt.Errorf("draw the seq: %w", err)
		}
		env := &events.Envelope{Version: events.EnvelopeVersion, ID: events.RecordID(org, ns, seq), Type: events.TypeUsageRecorded,
			Org: org, Namespace: ns, Seq: seq, CommittedAt: s.now().UTC(), Usage: &events.Usage{Items: items}}
		b := &pgx.Batch{}
		if err := s.queueGenerationRecord(b, env, 0); err != nil {
			return err
		}
		if s.relayWake == nil {
			outbox.QueueNotify(b)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("queue the usage record: %w", err)
		}
		n = len(items)
		return nil
	})
	return n, err
}
