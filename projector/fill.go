package projector

import (
	"context"
	"errors"
	"maps"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A projection that is behind (a replay, a backlog) has more records on the topic
// than one fetch hands over, and the pace admits only a few batches a second: each
// batch should carry as many records as it may, so the parts budget buys the most
// records per part. So a batch whose fetches show records past the ones in hand keeps
// polling, for at most FillWait, until it holds BatchRows. A projection that is caught
// up starts its batch at once with whatever arrived. A projection so far behind that
// the records past the batch would fill it (a replay) polls until it is full: the
// records are there, and under load FillWait ran out with batches a third to three
// quarters full; farFillWait only bounds a fetch that never comes.
//
// What a fetch shows of a partition outlives the batch: a replay's tail batches began
// with the few records of the partitions fetched first and, seeing nothing past them,
// started at once while the other partitions still held thousands (a 14,000-record
// replay took six batches, four of them of 400-700 records). So a batch starts from
// the lags the batch before it saw, and the partitions still behind there keep it
// polling (for FillWait: a lag that old decides no longer wait). A partition that
// brings nothing before the wait runs out (revoked by a rebalance, say) is forgotten.

// polled is a batch's records and, per partition, the records past the last of them
// as of the latest fetch.
type polled struct {
	recs []*kgo.Record
	// bytes are the records' keys and values: most of what the batch holds until it
	// is written (their decoded content is about as large again).
	bytes int64
	lag   map[int32]int64
	// fetched are the partitions a fetch of this batch reported; the others' lags are
	// the batch before's.
	fetched map[int32]bool
}

// farFillWait bounds the filling of a batch whose backlog would fill it.
const farFillWait = 10 * time.Second

// backlog is how many records this batch's fetches showed past the ones in hand.
func (b *polled) backlog() int64 {
	var n int64
	for p, l := range b.lag {
		if b.fetched[p] {
			n += l
		}
	}
	return n
}

// forgetUnfetched drops the lags of the partitions no fetch of this batch reported.
func (b *polled) forgetUnfetched() {
	for p := range b.lag {
		if !b.fetched[p] {
			delete(b.lag, p)
		}
	}
}

// behind reports whether a fetch showed records past the ones in hand.
func (b *polled) behind() bool {
	for _, n := range b.lag {
		if n > 0 {
			return true
		}
	}
	return false
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
		b.fetched[ftp.Partition] = true
		b.recs = append(b.recs, ftp.Records...)
		for _, r := range ftp.Records {
			b.bytes += int64(len(r.Key) + len(r.Value))
		}
	})
}

// pollBatch polls the next batch: it waits for records, then, while the projection is
// behind (by seen, the lags the batch before left, and the batch's own fetches), polls
// for more until the batch is full or the fill wait has passed. A batch whose backlog
// would fill it takes up to ReplayBatchRows records and ReplayBatchBytes of them
// (the one fetch that passes it is kept).
func (p *Projector) pollBatch(ctx context.Context, consumer *kgo.Client, seen map[int32]int64) polled {
	b := polled{lag: maps.Clone(seen), fetched: map[int32]bool{}}
	if b.lag == nil {
		b.lag = map[int32]int64{}
	}
	b.add(consumer.PollRecords(ctx, p.cfg.BatchRows), p)
	if len(b.recs) == 0 || !b.behind() {
		return b
	}
	wait, rows, bytes := p.cfg.fill(b.backlog(), len(b.recs))
	fctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for len(b.recs) < rows && b.bytes < bytes && b.behind() && fctx.Err() == nil {
		had := len(b.recs)
		b.add(consumer.PollRecords(fctx, rows-len(b.recs)), p)
		if len(b.recs) == had {
			b.forgetUnfetched() // the wait ran out: what they showed is not coming
		}
	}
	return b
}

// fill is how long a batch holding inHand records, with backlog past them, polls for
// more, and how many records and bytes of them it takes at most: one whose backlog
// would fill it is behind (a replay, a long backlog) and takes up to ReplayBatchRows
// and ReplayBatchBytes (never fewer than BatchRows), as many as are there.
func (cfg settings) fill(backlog int64, inHand int) (time.Duration, int, int64) {
	if backlog >= int64(cfg.BatchRows-inHand) {
		return max(cfg.FillWait, farFillWait), max(cfg.ReplayBatchRows, cfg.BatchRows), cfg.replayBytes()
	}
	return cfg.FillWait, cfg.BatchRows, math.MaxInt64
}

// replayBytes is ReplayBatchBytes, or no bound when it is 0.
func (cfg settings) replayBytes() int64 {
	if cfg.ReplayBatchBytes <= 0 {
		return math.MaxInt64
	}
	return cfg.ReplayBatchBytes
}

// fillWaitFor is the fill wait a pace interval implies: a batch that is behind waits
// about as long as the pace would hold the next one back anyway.
func fillWaitFor(interval time.Duration) time.Duration {
	return min(max(interval, 100*time.Millisecond), time.Second)
}
