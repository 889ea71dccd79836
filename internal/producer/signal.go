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
	// name and match within the retention, or one at the same time, a
	// no-op (it answers the first send's id, Duplicate): the signal is
	// delivered once. Empty: every send is a signal.
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
	// Duplicate says the idempotency key was sent before, or is being
	// sent at this moment: nothing was sent again (a first send that was
	// cut short is finished now, with its id and data: Delivered are the
	// steps it completed then, or Kept).
	Duplicate bool `json:"duplicate"`
}

// SignalTarget is a step a signal completed.
type SignalTarget struct {
	Workflow string `json:"workflow"`
	Step     string `json:"step"`
}

// ErrBadSignal wraps a signal that cannot be sent: a bad name, a match
// too long or holding control characters, data too long
// (ErrSignalTooLarge), data that is not JSON.
var ErrBadSignal = errors.New("bad signal")

// checkSignal refuses a signal that cannot be sent, naming what is wrong,
// and returns its data as it is kept (compact JSON).
func (c *Client) checkSignal(s Signal) (string, error) {
	if !spec.ValidSignalName(s.Name) {
		return "", fmt.Errorf("%w: name %q is not a signal name (a letter or digit, then letters, digits, _ . : / -, at most %d bytes)",
			ErrBadSignal, flow.BoundID(s.Name), spec.MaxSignalName)
	}
	if err := checkMatch(s.Match); err != nil {
		return "", err
	}
	if maxData := c.maxSignalBytes(); len(s.Data) > maxData {
		return "", fmt.Errorf("%w: data is %d bytes, over limits.max_signal_bytes (%d)", ErrSignalTooLarge, len(s.Data), maxData)
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
//
// With an idempotency key, one send of the key sends: it claims the key
// as it takes the waiting steps, and holds the claim while it delivers.
// Any other send of the key, at the same time or later, is a Duplicate
// that sends nothing; only a send cut short (its claim released by an
// error, or lapsed: its sender died) is finished by the next send of the
// key, with the first send's id and data.
func (c *Client) Signal(ctx context.Context, s Signal) (*SignalResult, error) {
	data, err := c.checkSignal(s)
	if err != nil {
		return nil, err
	}
	sender := newSignalID()
	send, err := c.store.SendSignal(ctx, s.Name, s.Match, sender, data, s.IdempotencyKey, c.o.Retention+time.Minute, signalClaimLease)
	if err != nil {
		return nil, err
	}
	res := &SignalResult{ID: send.ID, Duplicate: send.Duplicate, Delivered: []SignalTarget{}}
	if send.Duplicate {
		if !send.Resume {
			// being sent, kept or delivered: nothing to do but confirm
			// what this caller is told (with durability on)
			return res, c.store.Confirm(ctx, store.SignalKey(s.Name, s.Match))
		}
		data = send.Data // cut short: finish it, with the first send's data
	}
	var release func()
	if s.IdempotencyKey != "" {
		release = c.holdSignalClaim(ctx, s, sender)
	}
	sig := flow.SignalSend{Name: s.Name, Match: s.Match, ID: send.ID, Data: data, Key: s.IdempotencyKey, MaxKept: c.maxKeptSignals()}
	delivered, kept, err := flow.DeliverSignal(ctx, c.store, c.asynq, c.spec, sig, send.To, c.signalKeep(), c.now())
	if release != nil {
		release()
	}
	for _, w := range delivered {
		res.Delivered = append(res.Delivered, SignalTarget{Workflow: w.Workflow, Step: w.Step})
	}
	if kept != nil {
		res.Kept, res.KeptUntil = true, kept
	}
	if errors.Is(err, store.ErrSignalSettled) {
		// another sender of the key, which took over a claim this one
		// held too long, kept or delivered it
		res.Duplicate = true
		err = nil
	}
	if err == nil {
		// with durability on: the signal's own keys (kept, delivered)
		// confirmed on their primary; each step it completed was
		// confirmed by its settle
		return res, c.store.Confirm(ctx, store.SignalKey(s.Name, s.Match))
	}
	if errors.Is(err, store.ErrNotConfirmed) {
		return res, err // delivered on the primary: the claim stays, a resend is a duplicate
	}
	if errors.Is(err, ErrOverLimit) && s.IdempotencyKey != "" && !send.Duplicate {
		// nothing sent: the key's record goes (a resend is a first send,
		// not a copy of this one's data kept for the retention)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		dropped, _ := c.store.DropSignalSend(rctx, s.Name, s.Match, s.IdempotencyKey, sender)
		cancel()
		if dropped {
			return res, err
		}
	}
	if err != nil && s.IdempotencyKey != "" {
		// the next send of the key finishes it at once; if this fails
		// too, once the claim lapses
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = c.store.ReleaseSignalClaim(rctx, s.Name, s.Match, s.IdempotencyKey, sender)
		cancel()
	}
	return res, err
}

// signalClaimLease is how long a sender's claim on an idempotency key
// holds without a renewal: a send of the key while it holds is a
// duplicate; once it lapsed (the sender died mid-send), the next send of
// the key finishes the send. A sender renews it every third of it.
const signalClaimLease = 30 * time.Second

// holdSignalClaim renews sender's claim on s's idempotency key until the
// function it returns is called (and returns once the renewing stopped).
func (c *Client) holdSignalClaim(ctx context.Context, s Signal, sender string) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(signalClaimLease / 3)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				// renewals failing for a whole lease, or a claim lost (it
				// lapsed and another sender took it over): another sender of
				// the key may finish the send too (a step is completed once;
				// a send kept or delivered is not kept again)
				held, err := c.store.RenewSignalClaim(ctx, s.Name, s.Match, s.IdempotencyKey, sender, signalClaimLease)
				if err == nil && !held {
					return
				}
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
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
