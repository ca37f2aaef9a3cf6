package projector

import "time"

// pacer is a token bucket over batch starts: one token per interval, up to a second's
// worth (at least one) saved. A projection that sees a write now and then writes it at
// once; a busy one starts at most 1s/interval inserts per table per second, however
// many records arrive, which is ClickHouse's parts budget.
type pacer struct {
	interval time.Duration
	burst    float64
	tokens   float64
	last     time.Time
}

func newPacer(interval time.Duration, now time.Time) *pacer {
	burst := 1.0
	if interval > 0 && interval < time.Second {
		burst = float64(time.Second / interval)
	}
	return &pacer{interval: interval, burst: burst, tokens: burst, last: now}
}

func (p *pacer) refill(now time.Time) {
	if p.interval <= 0 {
		p.tokens = p.burst
		return
	}
	p.tokens += float64(now.Sub(p.last)) / float64(p.interval)
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
	return time.Duration((1 - p.tokens) * float64(p.interval))
}

// take spends the token of a batch that starts now.
func (p *pacer) take(now time.Time) {
	p.refill(now)
	p.tokens--
}
