package index

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// followRest is how long the follower rests between fetches once it has read up to
// the topic's end and no search waits for it. Each fetch the embedded broker answers
// and the follower handles cost about as much CPU as the records in it (a fetch a
// record when it fetched as they came: about a fifth of loomd's CPU a memory.set went
// to this follower and its share of the broker's fetch handling), while only a
// knowledge search reads the index's positions, and it waits for them (WaitFor), which
// wakes the follower at once. So the rest costs a search nothing it can notice: a
// waiting search is one or two fetches from its position, rested or not.
const followRest = 250 * time.Millisecond

// want wakes a resting follower: a search is waiting for a position.
func (x *Index) want() {
	select {
	case x.wanted <- struct{}{}:
	default:
	}
}

// rest waits, before the follower's next poll, for a search to wait for a position,
// for d, or for ctx to end, whichever comes first; it does not wait at all while a
// search is waiting. The franz-go client does not fetch again until its buffered
// fetch is polled, so resting here spaces the broker's fetches too.
func (x *Index) rest(ctx context.Context, d time.Duration) {
	if x.waiting.Load() > 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-x.wanted:
	case <-t.C:
	case <-ctx.Done():
	}
}

// caughtUp reports whether a poll read every partition it fetched up to its high
// watermark as of the fetch: the follower is at the topic's end and may rest.
func caughtUp(fetches kgo.Fetches) bool {
	up := true
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if n := len(p.Records); n > 0 && p.Records[n-1].Offset+1 < p.HighWatermark {
			up = false
		}
	})
	return up
}
