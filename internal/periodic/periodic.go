// Package periodic runs a pass at a fixed interval until its context ends: the sweeps,
// the workers' passes and the projector's repair.
package periodic

import (
	"context"
	"time"
)

// Every runs fn every interval until ctx ends; the first run is one interval in.
func Every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fn()
	}
}
