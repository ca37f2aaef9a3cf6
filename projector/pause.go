package projector

import (
	"context"
	"sync/atomic"
)

// Switch runs a process's projector so that a request may stand it aside: its
// consumer leaves the group, so the group's offsets may be moved (an admin reset of
// the process's own projection), and it joins again when the request is done.
type Switch struct {
	running atomic.Bool
	pause   chan pauseRequest
}

// pauseRequest is answered by closing paused once the projector's consumer has left
// its group; the projector waits until resume is closed.
type pauseRequest struct {
	paused chan struct{}
	resume chan struct{}
}

// NewSwitch returns a switch with no projector running.
func NewSwitch() *Switch { return &Switch{pause: make(chan pauseRequest)} }

// Run runs p as a member of its group until ctx ends, standing aside while a Pause
// holds it, and its repair pass (RunRepair) beside it.
func (s *Switch) Run(ctx context.Context, p *Projector, brokers []string) error {
	s.running.Store(true)
	defer s.running.Store(false)
	rctx, stopRepair := context.WithCancel(ctx)
	repaired := make(chan struct{})
	go func() { defer close(repaired); p.RunRepair(rctx, brokers) }()
	defer func() { stopRepair(); <-repaired }()
	for {
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.RunMember(runCtx, brokers) }()
		select {
		case err := <-done:
			stop()
			if ctx.Err() != nil {
				return nil
			}
			return err
		case req := <-s.pause:
			stop()
			err := <-done
			close(req.paused)
			if err != nil && ctx.Err() == nil {
				p.log.Warn("projector: stopped with an error before a pause", "err", err)
			}
			select {
			case <-req.resume:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// Pause stands the running projector aside until resume is called; paused is false
// (and resume does nothing) when no projector runs.
func (s *Switch) Pause(ctx context.Context) (resume func(), paused bool, err error) {
	if !s.running.Load() {
		return func() {}, false, nil
	}
	req := pauseRequest{paused: make(chan struct{}), resume: make(chan struct{})}
	select {
	case s.pause <- req:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	select {
	case <-req.paused:
	case <-ctx.Done():
		close(req.resume)
		return nil, false, ctx.Err()
	}
	return func() { close(req.resume) }, true, nil
}
