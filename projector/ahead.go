package projector

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A projection far behind (a replay, a long backlog) spends a batch's poll fetching
// and parsing its records (as long as a bare read of them: a fifth of a 20,000-record
// replay's time in the bench) while ClickHouse waits, and ClickHouse's inserts while the
// broker and the client wait. So while such a batch is applied, the next one is
// polled: it is full either way, and its records stay uncommitted until it is
// applied in turn. The client blocks a rebalance from the first poll until
// AllowRebalance, and the batch polled ahead is held over the end of the one before:
// a batch polled ahead is applied without polling another, so a rebalance waits two
// batches at most, as it waited one.

// ahead is a batch being polled while the one before it is applied.
type ahead struct {
	done   chan struct{}
	polled polled
	took   time.Duration // the poll's time
}

// pollAhead starts polling the batch after the one whose partitions' lags are seen.
func (p *Projector) pollAhead(ctx context.Context, consumer *kgo.Client, seen map[int32]int64) *ahead {
	a := &ahead{done: make(chan struct{})}
	go func() {
		defer close(a.done)
		start := time.Now()
		a.polled = p.pollBatch(ctx, consumer, seen)
		a.took = time.Since(start)
	}()
	return a
}

// wait answers the batch once its poll is done.
func (a *ahead) wait() polled {
	<-a.done
	return a.polled
}

// farBehind reports whether the records past b fill another batch: the next batch is
// full whenever it is polled, so it may be polled ahead.
func (cfg settings) farBehind(b polled) bool {
	return len(b.recs) >= cfg.BatchRows && b.backlog() >= int64(cfg.BatchRows)
}
