package engine

// What a failed attempt returns to asynq: the classes of failures that are
// not the step's own, and StepError, which RetryDelay and IsFailure read.

import (
	"fmt"
	"time"

	"github.com/agentq/agentq/retry"
)

// classBusy marks a duplicate delivery that waits for the step's lease.
const classBusy retry.Class = "busy"

// classStale marks an attempt whose outcome the store refused: a later
// attempt took the step, or the safety net ended this one.
const classStale retry.Class = "stale"

// classUnrecorded marks an attempt whose answer could not be recorded
// (Redis away longer than settleTimeout); the answer is kept in memory.
const classUnrecorded retry.Class = "unrecorded"

// busyRecheck is how soon a busy duplicate looks again.
const busyRecheck = time.Second

// StepError is the error a step task returns when its attempt failed and
// should be retried later; RetryDelay reads it.
type StepError struct {
	Class      retry.Class
	RetryAfter time.Duration // the earliest wait a provider asked for
	// Delay, when set, is the wait before the next attempt exactly: the
	// handler decided it with the worker's RetryPolicy and recorded when
	// the attempt is due (status shows it), so asynq waits just that.
	Delay time.Duration
	Free  bool // does not use up one of the step's retries
	Err   error
}

func (e *StepError) Error() string { return fmt.Sprintf("%s: %v", e.Class, e.Err) }
func (e *StepError) Unwrap() error { return e.Err }
