package engine

import (
	"errors"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/retry"
)

// RetryPolicy is what asynq asks about a failed step: how long to wait
// (RetryDelay) and whether the failure counts against the step's retries
// (IsFailure).
type RetryPolicy struct {
	Backoff retry.Backoff
	// Random returns values in [0, 1); nil is not allowed (inject it).
	Random func() float64
}

// RetryDelay implements asynq.RetryDelayFunc: max(backoff(n) × jitter,
// the provider's Retry-After or the earliest key cooldown). asynq keeps
// retry times in whole seconds, rounding down, so a wait for a cooldown
// gets one more second: the retry must not come before the key is usable.
func (p RetryPolicy) RetryDelay(n int, err error, _ *asynq.Task) time.Duration {
	var se *StepError
	if errors.As(err, &se) && se.Delay > 0 {
		return se.Delay // decided, and recorded, by the handler
	}
	d := p.Backoff.Delay(n, p.Random)
	if se != nil && se.RetryAfter > d {
		d = se.RetryAfter + time.Second
	}
	if se != nil {
		switch se.Class {
		case retry.Canceled:
			return time.Second // not a failure: come back soon (e.g. after a shutdown)
		case retry.Busy:
			return se.RetryAfter
		}
	}
	return d
}

// IsFailure implements asynq's Config.IsFailure: a canceled attempt (worker
// shutting down), a duplicate waiting for the step's lease and a wait for
// rate-limited keys do not use up one of the step's retries.
func (RetryPolicy) IsFailure(err error) bool {
	var se *StepError
	if errors.As(err, &se) && (se.Class == retry.Canceled || se.Free || se.Class.Rule().Free) {
		return false
	}
	return true
}
