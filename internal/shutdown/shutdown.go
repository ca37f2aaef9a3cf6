// Package shutdown holds what a graceful stop needs: work that is under way when the
// process is asked to stop finishes within a grace, instead of being cut where it stands.
package shutdown

import (
	"context"
	"time"
)

// Outlive returns a context for one unit of work (a relay round, a projector batch)
// that is not cancelled when parent is, but grace after it: work begun before a
// shutdown finishes, and work that hangs is still cut. Call cancel when the unit ends.
func Outlive(parent context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	stop := context.AfterFunc(parent, func() { time.AfterFunc(grace, cancel) })
	return ctx, func() { stop(); cancel() }
}
