package producer

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/spec"
)

// ErrSignalTooLarge wraps a signal whose data is over
// limits.max_signal_bytes; it is an ErrBadSignal too.
var ErrSignalTooLarge = fmt.Errorf("%w: too large", ErrBadSignal)

// ErrOverLimit is returned for a send refused because a bound of limits:
// is reached: a signal no step waits for while limits.max_kept_signals
// are kept. Nothing was sent (an idempotency key's send is forgotten: the
// key may be sent again); try again later (OverLimitError.RetryAfter).
var ErrOverLimit = flow.ErrOverLimit

// OverLimitError is an ErrOverLimit naming the limit, its value and when
// a place may be free.
type OverLimitError = flow.OverLimitError

// maxSignalBytes is the most data a signal may carry.
func (c *Client) maxSignalBytes() int {
	if c.o.MaxSignalBytes > 0 {
		return c.o.MaxSignalBytes
	}
	return defaults.MaxSignalBytes
}

// maxKeptSignals is the most signals kept at once.
func (c *Client) maxKeptSignals() int {
	if c.o.MaxKeptSignals > 0 {
		return c.o.MaxKeptSignals
	}
	return defaults.MaxKeptSignals
}

// checkMatch refuses a match value that no waiting step can render: too
// long, not UTF-8, or holding a control character (C0, DEL or C1).
func checkMatch(m string) error {
	switch {
	case len(m) > spec.MaxSignalMatch:
		return fmt.Errorf("%w: match is %d bytes, over %d", ErrBadSignal, len(m), spec.MaxSignalMatch)
	case !utf8.ValidString(m):
		return fmt.Errorf("%w: match is not UTF-8", ErrBadSignal)
	}
	for i, r := range m {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: match holds a control character (%U) at byte %d", ErrBadSignal, r, i)
		}
	}
	return nil
}
