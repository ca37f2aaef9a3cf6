package projector

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"
)

// polled is a batch's records and, per partition, the records past the last of them
// as of the latest fetch.
type polled struct {
	recs []*kgo.Record
	lag  map[int32]int64
}

func (b *polled) add(fetches kgo.Fetches, p *Projector) {
	fetches.EachError(func(topic string, part int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			p.log.Warn("projector: fetch error", "topic", topic, "partition", part, "err", err)
		}
	})
	fetches.EachPartition(func(ftp kgo.FetchTopicPartition) {
		if len(ftp.Records) == 0 {
			return
		}
		last := ftp.Records[len(ftp.Records)-1].Offset
		b.lag[ftp.Partition] = max(ftp.HighWatermark-last-1, 0)
		b.recs = append(b.recs, ftp.Records...)
	})
}

// pollBatch polls the next batch.
func (p *Projector) pollBatch(ctx context.Context, consumer *kgo.Client) polled {
	b := polled{lag: map[int32]int64{}}
	b.add(consumer.PollRecords(ctx, p.cfg.BatchRows), p)
	return b
}
