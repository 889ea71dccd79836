package producer

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// Signal is one signal to send: it completes every signal step
// (wait_for:) waiting on its (Name, Match) when it is sent, with Data as
// their output; if none waits, it is kept (signals.keep) for the first
// step that begins waiting on it.
type Signal struct {
	Name  string          `json:"name"`
	Match string          `json:"match"`
	Data  json.RawMessage `json:"data,omitempty"` // JSON; empty: null
	// IdempotencyKey, when set, makes a second send with the same key,
	// name and match within the retention a no-op (it answers the first
	// send's id, Duplicate); empty: every send is a signal.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// SignalResult is what a send did.
type SignalResult struct {
	ID string `json:"id"`
	// Delivered are the steps it completed, each by workflow and step.
	Delivered []SignalTarget `json:"delivered"`
	// Kept says no step waited: the signal is kept until KeptUntil for
	// the first step that begins waiting on it.
	Kept      bool       `json:"kept"`
	KeptUntil *time.Time `json:"kept_until,omitempty"`
	// Duplicate says the idempotency key was sent before: nothing was
	// sent again (steps the first send reached but had not completed, if
	// it was cut short, are completed now with its data).
	Duplicate bool `json:"duplicate"`
}

// SignalTarget is a step a signal completed.
type SignalTarget struct {
	Workflow string `json:"workflow"`
	Step     string `json:"step"`
}

// ErrBadSignal wraps a signal that cannot be sent: a bad name, a match
// or data too long, data that is not JSON.
var ErrBadSignal = errors.New("bad signal")

// keepRounds bounds the sends a signal makes while steps keep beginning
// to wait, and then stop waiting, between its rounds.
const keepRounds = 8

// checkSignal refuses a signal that cannot be sent, naming what is wrong,
// and returns its data as it is kept (compact JSON).
func (c *Client) checkSignal(s Signal) (string, error) {
	maxData := c.o.MaxSignalBytes
	if maxData <= 0 {
		maxData = defaults.MaxOutputBytes
	}
	switch {
	case !spec.ValidSignalName(s.Name):
		return "", fmt.Errorf("%w: name %q is not a signal name (a letter or digit, then letters, digits, _ . : / -, at most %d bytes)",
			ErrBadSignal, flow.BoundID(s.Name), spec.MaxSignalName)
	case len(s.Match) > spec.MaxSignalMatch:
		return "", fmt.Errorf("%w: match is %d bytes, over %d", ErrBadSignal, len(s.Match), spec.MaxSignalMatch)
	case len(s.Data) > maxData:
		return "", fmt.Errorf("%w: data is %d bytes, over limits.max_output_bytes (%d)", ErrBadSignal, len(s.Data), maxData)
	}
	if s.IdempotencyKey != "" {
		if err := CheckIdempotencyKey(s.IdempotencyKey); err != nil {
			return "", err
		}
	}
	if len(bytes.TrimSpace(s.Data)) == 0 {
		return "null", nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, s.Data); err != nil {
		return "", fmt.Errorf("%w: data is not JSON: %v", ErrBadSignal, err)
	}
	return b.String(), nil
}

// Signal sends signal s: every signal step waiting on its (name, match)
// is completed with its data (dependents enqueued as for any settle), or,
// if none waits, it is kept for signals.keep. A send cut short (an
// error) leaves the steps it had not completed waiting: send again (with
// the same idempotency key, the same data reaches them).
func (c *Client) Signal(ctx context.Context, s Signal) (*SignalResult, error) {
	data, err := c.checkSignal(s)
	if err != nil {
		return nil, err
	}
	send, err := c.store.SendSignal(ctx, s.Name, s.Match, newSignalID(), data, s.IdempotencyKey, c.o.Retention+time.Minute)
	if err != nil {
		return nil, err
	}
	res := &SignalResult{ID: send.ID, Duplicate: send.Duplicate, Delivered: []SignalTarget{}}
	if send.Duplicate {
		data = send.Data // the first send's, for the steps it may not have completed
	}
	to := send.To
	for range keepRounds {
		var done, stale []store.Waiter
		for _, w := range to {
			ok, err := c.complete(ctx, w, data)
			if err != nil {
				return res, fmt.Errorf("signal %s: %d of %d steps completed: %w", s.Name, len(res.Delivered), len(to), err)
			}
			if ok {
				done = append(done, w)
				res.Delivered = append(res.Delivered, SignalTarget{Workflow: w.Workflow, Step: w.Step})
			} else {
				stale = append(stale, w)
			}
		}
		if len(done) > 0 || send.Duplicate {
			return res, c.store.DoneWaiters(ctx, s.Name, s.Match, append(done, stale...)...)
		}
		until := c.now().Add(c.signalKeep())
		more, err := c.store.KeepSignal(ctx, s.Name, s.Match, send.ID, data, until, stale...)
		if err != nil {
			return res, err
		}
		if len(more) == 0 {
			res.Kept, res.KeptUntil = true, &until
			return res, nil
		}
		to = more // steps began waiting since the send: they take it
	}
	return res, fmt.Errorf("signal %s: steps kept beginning and ending their waits; send it again", s.Name)
}

// complete completes waiter w with data; false if it no longer waits (its
// step settled another way, its workflow ended, expired or was rerun).
func (c *Client) complete(ctx context.Context, w store.Waiter, data string) (bool, error) {
	wspec, err := c.spec(ctx, w.Workflow)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if st, ok := wspec.Step(w.Step); !ok || st.WaitFor == nil {
		return false, nil
	}
	_, err = flow.Complete(ctx, c.store, c.asynq, w.Workflow, wspec, w.Step, w.Gen, data, "signal")
	if errors.Is(err, flow.ErrNotWaiting) {
		return false, nil
	}
	return err == nil, err
}

// signalKeep is how long a signal no step waited for is kept.
func (c *Client) signalKeep() time.Duration {
	if c.o.SignalKeep > 0 {
		return c.o.SignalKeep
	}
	return defaults.SignalKeep
}

func newSignalID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "sig_" + hex.EncodeToString(b[:])
}
