package client

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Retry is how a client sends a call again after a retryable error: exponential
// backoff (github.com/cenkalti/backoff), never shorter than the server's Retry-After.
//
// Retried: an *Error with Retryable set (the 503s: PROJECTION_BEHIND,
// ADMISSION_CONTENDED, IDEMPOTENT_IN_PROGRESS, ...), except a write's POSTGRES_UNAVAILABLE
// with outcome_unknown sent without an Idempotency-Key (its commit may stand: a second
// send would restate it); and a transport failure of a read or of a write under an
// Idempotency-Key. Nothing else: a refusal answers the same every time.
type Retry struct {
	// MaxElapsed bounds the whole call, retries included (default 30 s).
	MaxElapsed time.Duration
	// MaxAttempts bounds the sends (default 0: MaxElapsed alone bounds them).
	MaxAttempts int
	// InitialInterval is the first wait (default 200 ms); MaxInterval the longest (default 5 s).
	InitialInterval, MaxInterval time.Duration
	// IdempotentWrites gives every write sent without an Idempotency-Key a fresh one, so
	// that retrying it is safe whatever became of the first send.
	IdempotentWrites bool
	// OnRetry, when set, is told of each error that is about to be retried and the wait.
	OnRetry func(err error, wait time.Duration)
}

func (r Retry) backOff(ctx context.Context) backoff.BackOff {
	eb := backoff.NewExponentialBackOff()
	eb.InitialInterval = orDefault(r.InitialInterval, 200*time.Millisecond)
	eb.MaxInterval = orDefault(r.MaxInterval, 5*time.Second)
	eb.MaxElapsedTime = orDefault(r.MaxElapsed, 30*time.Second)
	var b backoff.BackOff = eb
	if r.MaxAttempts > 0 {
		b = backoff.WithMaxRetries(b, uint64(r.MaxAttempts-1))
	}
	return backoff.WithContext(b, ctx)
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// atLeast stretches a backoff's waits to the server's Retry-After.
type atLeast struct {
	backoff.BackOff
	min *time.Duration
}

func (a atLeast) NextBackOff() time.Duration {
	d := a.BackOff.NextBackOff()
	if d != backoff.Stop && d < *a.min {
		d = *a.min
	}
	return d
}

func (r Retry) run(ctx context.Context, k *call, send func() (*answer, error)) (*answer, error) {
	var serverWait time.Duration
	b := atLeast{BackOff: r.backOff(ctx), min: &serverWait}
	notify := func(err error, d time.Duration) {
		if r.OnRetry != nil {
			r.OnRetry(err, d)
		}
	}
	return backoff.RetryNotifyWithData(func() (*answer, error) {
		a, err := send()
		if err == nil {
			return a, nil
		}
		if !retryable(k, err) {
			return nil, backoff.Permanent(err)
		}
		serverWait = 0
		if e, ok := AsError(err); ok {
			serverWait = e.RetryAfter
		}
		return nil, err
	}, b, notify)
}

func retryable(k *call, err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	e, ok := AsError(err)
	if !ok { // the transport failed: the server may have acted on a write
		return !k.write || k.idemKey != "" || k.method == http.MethodGet
	}
	if !e.Retryable {
		return false
	}
	return !(k.write && e.OutcomeUnknown && k.idemKey == "")
}
