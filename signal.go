package agentq

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentq/agentq/internal/producer"
)

// Signal is one signal to send (SendSignal): a name, the match value that
// says which waiting steps it is for, JSON data, and an optional
// idempotency key.
type Signal = producer.Signal

// SignalResult is what a send did: the steps it completed, or that it was
// kept because none waited, or that its idempotency key was sent before.
type SignalResult = producer.SignalResult

// SignalTarget is a step a signal completed.
type SignalTarget = producer.SignalTarget

// ErrBadSignal is returned for a signal that cannot be sent (a bad name,
// a match too long or holding control characters, data over
// limits.max_signal_bytes, data that is not JSON); the error says which.
var ErrBadSignal = producer.ErrBadSignal

// ErrOverLimit is returned (match it with errors.Is) for a send refused at
// a bound of the configuration's limits:: a signal no step waits for while
// limits.max_kept_signals signals are kept. Nothing was sent (a send's
// idempotency key is free to send again); its message names the limit, its
// value and when a place may be free. Send it again later.
var ErrOverLimit = producer.ErrOverLimit

// Signal sends signal name with match value match: every signal step
// (wait_for:) waiting on that (name, match) now is completed with data as
// its output (data is marshaled to JSON; a json.RawMessage or []byte is
// sent as it is and must be JSON); if none waits, the signal is kept
// (signals.keep, 10 minutes by default) and the first step that begins
// waiting on it takes it. SendSignal says what a send did and takes an
// idempotency key.
func (c *Client) Signal(ctx context.Context, name, match string, data any) error {
	raw, err := signalData(data)
	if err != nil {
		return err
	}
	_, err = c.SendSignal(ctx, Signal{Name: name, Match: match, Data: raw})
	return err
}

// SendSignal sends s and reports what it did. With s.IdempotencyKey, a
// second send of the key (with the same name and match) within the
// retention is a no-op: Duplicate, with the first send's id.
func (c *Client) SendSignal(ctx context.Context, s Signal) (*SignalResult, error) {
	return wrapped(c.c.Signal(ctx, s))
}

// signalData is data as JSON.
func signalData(data any) (json.RawMessage, error) {
	switch d := data.(type) {
	case json.RawMessage:
		return d, nil
	case []byte:
		return d, nil
	case nil:
		return nil, nil
	}
	b, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("%w: data: %v", ErrBadSignal, err)
	}
	return b, nil
}
