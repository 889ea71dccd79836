package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/agentq/agentq/retry"
)

// What a code step's function returns steers the queue the way a provider's
// failure does. A plain error is class handler: retried with the step's
// usual backoff, then dead-lettered. These wrap an error to say more.

type stepVerdict int

const (
	verdictRetry stepVerdict = iota + 1
	verdictDeadLetter
	verdictDegrade
)

// verdictError is an error a code step returned through RetryAfter,
// ToDeadLetter or Degrade.
type verdictError struct {
	verdict  stepVerdict
	after    time.Duration
	fallback any
	err      error
}

func (e *verdictError) Error() string {
	if e.err == nil {
		return "step asked to " + e.what()
	}
	return e.err.Error()
}

func (e *verdictError) Unwrap() error { return e.err }

func (e *verdictError) what() string {
	switch e.verdict {
	case verdictRetry:
		return fmt.Sprintf("retry after %s", e.after)
	case verdictDeadLetter:
		return "be dead-lettered"
	}
	return "degrade"
}

// RetryAfter asks for the step to be tried again no sooner than d (a
// downstream service said when it will be back). It uses one of the step's
// retries; once they are spent the step is dead-lettered with err.
func RetryAfter(d time.Duration, err error) error {
	return &verdictError{verdict: verdictRetry, after: max(d, 0), err: err}
}

// ToDeadLetter parks the step for a person to review, with err as its
// reason, without using the retries that are left: input no retry will
// fix. `enqueue dlq requeue` runs it again.
func ToDeadLetter(err error) error { return &verdictError{verdict: verdictDeadLetter, err: err} }

// Degrade finishes the step with fallback as its output, marked degraded,
// and err kept as the reason: the workflow goes on with a lesser answer.
func Degrade(fallback any, err error) error {
	return &verdictError{verdict: verdictDegrade, fallback: fallback, err: err}
}

// handlerError is a code step's plain error or panic: class handler.
type handlerError struct{ err error }

func (e *handlerError) Error() string      { return e.err.Error() }
func (e *handlerError) Unwrap() error      { return e.err }
func (e *handlerError) Class() retry.Class { return retry.Handler }

// PanicError is a code step's panic, recovered: its value and the stack of
// the goroutine that panicked.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// asVerdict returns the verdict err carries, if any.
func asVerdict(err error) (*verdictError, bool) {
	var v *verdictError
	ok := errors.As(err, &v)
	return v, ok
}

// Verdict is what a code step's error asks of the queue, as a test reads
// it: "dead_letter", "degrade" (with Fallback), "retry_after" (with
// After), or "retry" for a plain error (class handler, or the class of a
// provider's failure passed on).
type Verdict struct {
	Kind     string
	After    time.Duration
	Fallback any
}

// VerdictOf reads err as the worker would.
func VerdictOf(err error) Verdict {
	v, ok := asVerdict(err)
	if !ok {
		return Verdict{Kind: "retry"}
	}
	switch v.verdict {
	case verdictDeadLetter:
		return Verdict{Kind: "dead_letter"}
	case verdictDegrade:
		return Verdict{Kind: "degrade", Fallback: v.fallback}
	}
	return Verdict{Kind: "retry_after", After: v.after}
}
