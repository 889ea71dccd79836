package flow

import (
	"errors"
	"fmt"
	"time"
)

// ErrOverLimit is returned for a write refused because a bound of the
// configuration's limits: is reached (the signals kept at once:
// limits.max_kept_signals): nothing was written; try again later.
var ErrOverLimit = errors.New("over a limit")

// OverLimitError is an ErrOverLimit naming the limit, its value and when
// to try again.
type OverLimitError struct {
	What       string        // what was refused ("signal paid: not kept")
	Limit      string        // the limit, as configured ("limits.max_kept_signals")
	Value      int           // its value
	RetryAfter time.Duration // when a place may be free (at least a second)
}

func (e *OverLimitError) Error() string {
	return fmt.Sprintf("%s: %s (%d) reached; try again in %s", e.What, e.Limit, e.Value, e.RetryAfter)
}

// Unwrap makes it an ErrOverLimit.
func (e *OverLimitError) Unwrap() error { return ErrOverLimit }

// retryAfter is how long until next, in whole seconds, at least one.
func retryAfter(next, now time.Time) time.Duration {
	d := next.Sub(now)
	if d < time.Second {
		return time.Second
	}
	return (d + time.Second - 1).Truncate(time.Second)
}
