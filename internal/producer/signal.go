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
	// sent again (a first send that was cut short is finished now, with
	// its data: Delivered are the steps it completed then).
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
// the same idempotency key, the same data reaches the steps the first
// send was for, or is kept).
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
		if send.Finished {
			return res, nil // kept or delivered: nothing to do again
		}
		data = send.Data // cut short: finish it, with the first send's data
	}
	sig := flow.SignalSend{Name: s.Name, Match: s.Match, ID: send.ID, Data: data, Key: s.IdempotencyKey}
	delivered, kept, err := flow.DeliverSignal(ctx, c.store, c.asynq, c.spec, sig, send.To, c.signalKeep(), c.now())
	for _, w := range delivered {
		res.Delivered = append(res.Delivered, SignalTarget{Workflow: w.Workflow, Step: w.Step})
	}
	if kept != nil {
		res.Kept, res.KeptUntil = true, kept
	}
	return res, err
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
