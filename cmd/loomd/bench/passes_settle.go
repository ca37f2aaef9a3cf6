package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/kafka"
	"github.com/loomplane/loom/workers"
)

// A case's second process starts each topic pass's consumer group where the last case
// that ran it left off, so it first reads every record written since: a catch-up a
// long-running process does not pay. settleFeeds waits for it before the case is
// measured, so the case measures the passes at their steady pace.
const (
	passSettleLag = 200              // records behind the topic's end counted as caught up (the feed keeps writing)
	passSettleMax = 60 * time.Second // the longest wait; a case measured before it caught up says so
)

// fedGroups are the consumer groups of the topic passes w runs.
func fedGroups(w config.Workers) []string {
	var out []string
	for name, on := range map[string]bool{"conflict_resolver": w.Resolver.Enabled, "usage_fold": w.UsageFold.Enabled,
		"embedding_worker": w.Embedding.Enabled, "sensitivity_sweep": w.SensitivitySweep.Enabled,
		"entity_extractor": w.Entities.Enabled, "structured_profile": w.Profiles.Enabled, "profile_consolidation": w.ProfileConsolidation.Enabled} {
		if on {
			out = append(out, workers.Group(name))
		}
	}
	return out
}

// settleFeeds waits until the groups of w's topic passes are within passSettleLag
// records of the topic's end, and says how long it took.
func (r *runner) settleFeeds(ctx context.Context, w config.Workers) string {
	groups := fedGroups(w)
	if len(groups) == 0 {
		return ""
	}
	cl, err := kafka.NewClient(r.t.Process.Cfg.Kafka.Brokers)
	if err != nil {
		return fmt.Sprintf("; the topic passes' catch-up not awaited (%v)", err)
	}
	adm := kadm.NewClient(cl)
	defer adm.Close()
	topic, start := r.t.Process.Cfg.Pipeline.Topic, time.Now()
	for {
		lag, err := feedLag(ctx, adm, topic, groups)
		switch {
		case err == nil && lag <= passSettleLag:
			return fmt.Sprintf("; the topic passes caught up in %s before the run", time.Since(start).Round(100*time.Millisecond))
		case time.Since(start) > passSettleMax || ctx.Err() != nil:
			return fmt.Sprintf("; measured with the topic passes %d records behind (lag read: %v)", lag, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// feedLag is the records groups have still to read of topic, summed.
func feedLag(ctx context.Context, adm *kadm.Client, topic string, groups []string) (int64, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, g := range groups {
		committed, err := adm.FetchOffsets(ctx, g)
		if err != nil {
			return 0, err
		}
		ends.Each(func(o kadm.ListedOffset) {
			at := int64(0)
			if c, ok := committed.Lookup(topic, o.Partition); ok && c.At > 0 {
				at = c.At
			}
			total += max(o.Offset-at, 0)
		})
	}
	return total, nil
}
