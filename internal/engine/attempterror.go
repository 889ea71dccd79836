package engine

// What a failed attempt returns to asynq: the classes of failures that are
// not the step's own, and StepError, which RetryDelay and IsFailure read.

import (
	"fmt"
	"time"

	"github.com/agentq/agentq/retry"
)

// busyRecheck is how soon a busy duplicate looks again.
const busyRecheck = time.Second

// unreadyRecheck is how soon a step whose inputs were not all settled
// looks again: an input's unconfirmed task comes back every
// unconfirmedRecheck.
const unreadyRecheck = unconfirmedRecheck

// StepError is the error a step task returns when its attempt failed and
// should be retried later; RetryDelay reads it.
type StepError struct {
	Class      retry.Class
	RetryAfter time.Duration // the earliest wait a provider asked for
	// Delay, when set, is the wait before the next attempt exactly: the
	// handler decided it with the worker's RetryPolicy and recorded when
	// the attempt is due (status shows it), so asynq waits just that.
	Delay time.Duration
	// Free: the attempt uses none of the step's retries, as every
	// attempt of a class whose rule is Free (retry.Busy, …) does.
	Free bool
	Err  error
}

func (e *StepError) Error() string { return fmt.Sprintf("%s: %v", e.Class, e.Err) }
func (e *StepError) Unwrap() error { return e.Err }
