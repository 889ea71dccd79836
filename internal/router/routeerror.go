package router

// The errors a route returns: every attempt's failure, a target that was
// skipped, and an auth failure found by probing.

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentq/agentq/llmclient"

	"github.com/agentq/agentq/retry"
)

// RouteError is the failure of every target of a route in one attempt.
type RouteError struct {
	Route    string
	Attempts []error // one per call, in order; each usually an *Error
}

func (e *RouteError) Error() string {
	parts := make([]string, len(e.Attempts))
	for i, a := range e.Attempts {
		parts[i] = a.Error()
	}
	return fmt.Sprintf("route %s: %d call(s) failed: %s", e.Route, len(e.Attempts), strings.Join(parts, "; "))
}

// Unwrap exposes the attempts to errors.Is/As.
func (e *RouteError) Unwrap() []error { return e.Attempts }

// Class is the class that decides what happens next: canceled if the call
// was canceled; the request's own fault (bad_request, context_length,
// content_filter) if the route stopped on one, even after another key or
// target failed for a reason of its own; a non-retryable class if every
// attempt had one; else the last retryable class.
func (e *RouteError) Class() retry.Class {
	if n := len(e.Attempts); n > 0 {
		if c := retry.ClassOf(e.Attempts[n-1]); c.RequestFault() {
			for _, a := range e.Attempts {
				if retry.ClassOf(a) == retry.Canceled {
					return retry.Canceled
				}
			}
			return c
		}
	}
	var last retry.Class = retry.Network
	allFinal := len(e.Attempts) > 0
	for _, a := range e.Attempts {
		c := retry.ClassOf(a)
		if c == retry.Canceled {
			return c
		}
		if c.Retryable() {
			allFinal = false
			last = c
		}
	}
	if allFinal {
		return retry.ClassOf(e.Attempts[len(e.Attempts)-1])
	}
	return last
}

// RetryAfter is the earliest a retry can expect a key to be usable: the
// shortest Retry-After a provider sent, or the earliest end of a key
// cooldown that kept a target from being called; zero if neither.
func (e *RouteError) RetryAfter(now time.Time) time.Duration {
	var d time.Duration
	take := func(x time.Duration) {
		if x > 0 && (d == 0 || x < d) {
			d = x
		}
	}
	for _, a := range e.Attempts {
		var sk *SkippedError
		if errors.As(a, &sk) && !sk.Until.IsZero() {
			take(sk.Until.Sub(now))
		} else if pe, ok := llmclient.AsError(a); ok {
			take(pe.RetryAfter)
		}
	}
	return d
}

// SkippedError is a target the router did not call, and why: its breaker
// is open, every key of its provider is cooling or disabled, or its
// provider is at its max_concurrency/rpm limit.
type SkippedError struct {
	Target string    // provider/model
	Reason string    // e.g. "circuit open"
	Until  time.Time // when it may be callable again; zero: when a person acts
	class  retry.Class
}

func (e *SkippedError) Error() string {
	if e.Until.IsZero() {
		return fmt.Sprintf("%s: %s; not called", e.Target, e.Reason)
	}
	return fmt.Sprintf("%s: %s until %s; not called", e.Target, e.Reason, e.Until.UTC().Format(time.RFC3339Nano))
}

// Class is what the skip means for the step: server for an open circuit
// (the target is failing), rate_limited for cooling keys and full limits
// (waiting cures it), auth when every key is disabled.
func (e *SkippedError) Class() retry.Class { return e.class }

// Reasons a target is skipped.
const (
	SkipBreakerOpen  = "circuit open"
	SkipKeysCooling  = "every key is cooling down"
	SkipKeysDisabled = "every key is disabled (auth or quota); re-enable with `enqueue keys enable`"
	SkipLimited      = "at its provider's max_concurrency/rpm limit"
)

// AuthProbeError is a failure (a 500 with an empty body) that an auth
// probe showed to be a rejected key.
type AuthProbeError struct{ Err error }

func (e *AuthProbeError) Error() string {
	return e.Err.Error() + " (an auth probe confirmed the key is rejected)"
}

func (e *AuthProbeError) Unwrap() error { return e.Err }

func (e *AuthProbeError) Class() retry.Class { return retry.Auth }
