package metrics

import (
	"context"
	"sync"
	"time"
)

// StatGauge is a gauge read from one field of a statistic a store answers.
type StatGauge[T any] struct {
	Name, Help string
	Of         func(T) int64
}

// GaugesOf registers gauges that read their statistic at scrape time, once per
// scrape for all of them (at most once a second), and read -1 when it cannot be read.
func GaugesOf[T any](reg *Registry, read func(context.Context) (T, error), gauges []StatGauge[T]) {
	cache := &scrapeCache[T]{read: read}
	for _, g := range gauges {
		reg.GaugeFunc(g.Name, g.Help, func() float64 {
			v, err := cache.get()
			if err != nil {
				return -1
			}
			return float64(g.Of(v))
		})
	}
}

// scrapeCache reads a value for the gauges of one scrape that share it: once, not
// once per gauge.
type scrapeCache[T any] struct {
	read func(context.Context) (T, error)

	mu  sync.Mutex
	at  time.Time
	v   T
	err error
}

func (c *scrapeCache[T]) get() (T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) > time.Second {
		c.v, c.err = c.read(context.Background())
		c.at = time.Now()
	}
	return c.v, c.err
}
