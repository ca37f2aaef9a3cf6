package llm

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// A background caller (a worker's pass over queued rows) takes the same step around
// each call: read the namespace's allowance, leave a capped namespace until its cap
// resets, make the call, and class what failed, so it knows whether the row stays
// owed, is retried, or stops the pass. Step is that step; Outcome what it tells.

// Outcome is how a billed step ended, for its caller to act on.
type Outcome struct {
	// Class is the failure's class; 0 with Err nil: the call answered. 0 with Err set:
	// the allowance could not be read, or the call failed in no class (a store, a
	// context): ask later.
	Class Class
	// After is when asking again may help, when the step knows: the time left until
	// the namespace's cap resets when it was spent before the call. 0: the caller's
	// own delay.
	After time.Duration
	Err   error
}

// Answered reports whether the call answered.
func (o Outcome) Answered() bool { return o.Class == 0 && o.Err == nil }

// Step reads bill's allowance and, unless the namespace spent its cap (ClassCapped,
// After until it resets, no call made), makes call and classes its error. The outage
// notes a refusal of the key or the model (ClassStopped) and the first answer after
// one; nil notes nothing.
func (p *Provider) Step(ctx context.Context, bill Bill, outage *Outage, call func(context.Context) error) Outcome {
	b, err := p.Allowance(ctx, bill)
	if err != nil {
		return Outcome{Err: err}
	}
	if b.Capped() {
		return Outcome{Class: ClassCapped, After: time.Until(b.ResetsAt)}
	}
	err = call(ctx)
	o := Outcome{Class: ClassOf(err), Err: err}
	switch {
	case o.Class == ClassStopped:
		outage.stopped(err)
	case err == nil:
		outage.answered()
	}
	return o
}

// Outage remembers whether the provider refuses the key or the model, so a caller
// warns once when it starts and says once when it ends, however many calls see it.
type Outage struct {
	log  *slog.Logger
	who  string // whose calls, in the log lines
	mu   sync.Mutex
	down bool
}

// NewOutage returns an Outage that logs to log, naming the caller who.
func NewOutage(log *slog.Logger, who string) *Outage { return &Outage{log: log, who: who} }

func (o *Outage) stopped(err error) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.down {
		o.down = true
		o.log.Warn(o.who+": the provider refuses the key or the model; rows stay owed until it answers", "err", err)
	}
}

func (o *Outage) answered() {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.down {
		o.down = false
		o.log.Info(o.who + ": the provider answers again")
	}
}
