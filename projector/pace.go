package projector

import "time"

// pacer is a token bucket over batch starts: one token per interval, up to a second's
// worth (at least one) saved. A projection that sees a write now and then writes it at
// once; a busy one starts at most 1s/interval inserts per table per second, however
// many records arrive, which is ClickHouse's parts budget.
//
// A topic that keeps the projection busy (records were already waiting when it polled,
// or the pace held the batch back) while it keeps up (the batch was not full) is paced
// at busy instead: the saved tokens are given up, and one comes a busy interval.
// The stretch lasts while records keep coming: a full batch (a backlog, caught up at
// interval's pace) ends it, and so does a poll that waited a busy interval or more for
// a batch's first record (the topic paused; a shorter wait, a write loop stalled a few
// hundred milliseconds on a loaded machine, would end it and let a second's worth of
// batches out again). Each batch costs ClickHouse a part per
// table and the merges that fold it in, whatever its size: at one write at a time on
// the shared 2-core machine, an interval of 1 s against 250 ms cut ClickHouse's CPU per
// write 4× and the writes, on the same cores, ran 2.8× as fast
// (docs/bench/RESULTS-write.md).
type pacer struct {
	interval time.Duration
	busy     time.Duration // the interval while stretched; at most interval: never stretched
	burst    float64
	tokens   float64
	last     time.Time
	// stretched: the batches are busy and not full, and the topic has not paused.
	stretched bool
}

func newPacer(interval, busy time.Duration, now time.Time) *pacer {
	burst := 1.0
	if interval > 0 && interval < time.Second {
		burst = float64(time.Second / interval)
	}
	return &pacer{interval: interval, busy: busy, burst: burst, tokens: burst, last: now}
}

// step is the interval a token takes now.
func (p *pacer) step() time.Duration {
	if p.stretched && p.busy > p.interval {
		return p.busy
	}
	return p.interval
}

func (p *pacer) refill(now time.Time) {
	step := p.step()
	if step <= 0 {
		p.tokens = p.burst
		return
	}
	p.tokens += float64(now.Sub(p.last)) / float64(step)
	if p.tokens > p.burst {
		p.tokens = p.burst
	}
	p.last = now
}

// delay is how long until the next batch may start.
func (p *pacer) delay(now time.Time) time.Duration {
	p.refill(now)
	if p.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - p.tokens) * float64(p.step()))
}

// hurry is a read waiting for the projection (watermarks.WantedChannel): the stretch
// ends, so the next batch starts at the interval's pace, as an unstretched projection's
// would; never sooner, or waiting reads would buy a part each.
func (p *pacer) hurry(now time.Time) {
	p.refill(now)
	p.stretched = false
}

// take spends the token of a batch that starts now.
func (p *pacer) take(now time.Time) {
	p.refill(now)
	p.tokens--
}

// batched notes how the batch that started last went: whether the pace held it back,
// how long its poll waited for its first record, and whether it was full (as many
// records as a batch takes).
func (p *pacer) batched(now time.Time, held bool, waited time.Duration, full bool) {
	p.refill(now)
	busy := held || waited < waitedPoll
	p.stretched = !full && waited < max(p.busy, p.interval) && (busy || p.stretched)
	if p.stretched && p.busy > p.interval {
		// The batches a second saved up are for a write now and then; spent at the start
		// of a steady load they were tiny parts back to back (four in a load's first
		// second, each a part per table and its merges).
		p.tokens = min(p.tokens, 0)
	}
}

// waitedPoll is how long a poll blocks at least when no record was waiting: a shorter
// one found records that arrived while the last batch was written.
const waitedPoll = 10 * time.Millisecond
