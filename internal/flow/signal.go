package flow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// SignalSend is one signal on its way: its name, match value, id, data
// (JSON) and idempotency key ("": none).
type SignalSend struct {
	Name, Match, ID, Data, Key string
	// MaxKept, when above 0, refuses to keep it while that many signals
	// are kept (limits.max_kept_signals): an *OverLimitError. 0: kept
	// whatever the count (a kept signal a step took and gave back).
	MaxKept int
}

// SpecOf reads a workflow's spec (store.ErrNotFound once it is gone).
type SpecOf func(ctx context.Context, wf string) (*spec.Spec, error)

// keepRounds bounds the rounds a signal makes while steps keep beginning
// to wait, and then stop waiting, between them.
const keepRounds = 8

// DeliverSignal completes the waiters to (those that still wait) with
// s's data; if none did, it keeps s until now+keep for the first step that
// begins waiting, unless steps began waiting since: those it completes
// instead. It returns the steps completed, or when the kept signal lapses.
// Cut short by an error, it leaves the steps it did not complete waiting
// (a send again reaches them). Keeping it past s.MaxKept kept signals is
// an *OverLimitError: nothing was kept, nothing completed.
func DeliverSignal(ctx context.Context, st *store.Store, c *asynq.Client, specOf SpecOf, s SignalSend, to []store.Waiter, keep time.Duration, now time.Time) ([]store.Waiter, *time.Time, error) {
	var delivered []store.Waiter
	var unconfirmed error // a completion not confirmed by the replicas: done on the primary, told at the end
	for range keepRounds {
		var stale []store.Waiter
		for _, w := range to {
			ok, err := completeWaiter(ctx, st, c, specOf, w, s.Data)
			if errors.Is(err, store.ErrNotConfirmed) {
				ok, err, unconfirmed = true, nil, err
			}
			if err != nil {
				return delivered, nil, fmt.Errorf("signal %s: %d of %d steps completed: %w", s.Name, len(delivered), len(to), err)
			}
			if ok {
				delivered = append(delivered, w)
			} else {
				stale = append(stale, w)
			}
		}
		if len(delivered) > 0 {
			return delivered, nil, errors.Join(st.DoneWaiters(ctx, s.Name, s.Match, s.Key, append(delivered, stale...)...), unconfirmed)
		}
		until := now.Add(keep)
		if err := reserveKept(ctx, st, s, until, now); err != nil {
			return nil, nil, err
		}
		more, err := st.KeepSignal(ctx, s.Name, s.Match, s.ID, s.Data, s.Key, until, stale...)
		if err != nil {
			// settled: another sender of the key finished the send, and
			// may have kept it under the same id: its place stays (at
			// worst counted until it lapses)
			if !errors.Is(err, store.ErrSignalSettled) {
				_ = st.ReleaseKeptSignal(ctx, s.ID)
			}
			return nil, nil, err
		}
		if len(more) == 0 {
			return nil, &until, nil
		}
		if err := st.ReleaseKeptSignal(ctx, s.ID); err != nil { // not kept: steps began waiting since the send
			return nil, nil, err
		}
		to = more // they take it
	}
	return nil, nil, fmt.Errorf("signal %s: steps kept beginning and ending their waits; send it again", s.Name)
}

// completeWaiter completes waiter w with data; false if it no longer
// waits (its step settled another way, its workflow ended, expired or was
// rerun, or the step waits again as a later attempt).
func completeWaiter(ctx context.Context, st *store.Store, c *asynq.Client, specOf SpecOf, w store.Waiter, data string) (bool, error) {
	wspec, err := specOf(ctx, w.Workflow)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if s, ok := wspec.Step(w.Step); !ok || s.WaitFor == nil {
		return false, nil
	}
	_, err = Complete(ctx, st, c, w.Workflow, wspec, w.Step, w.Gen, w.Attempt, data, "signal")
	if errors.Is(err, ErrNotWaiting) {
		return false, nil
	}
	return err == nil, err
}

// reserveKept reserves s's place among the kept signals until it lapses,
// refused (an *OverLimitError) when s.MaxKept are kept already.
func reserveKept(ctx context.Context, st *store.Store, s SignalSend, until, now time.Time) error {
	ok, next, err := st.ReserveKeptSignal(ctx, s.ID, until, s.MaxKept)
	if err != nil {
		return fmt.Errorf("signal %s: %w", s.Name, err)
	}
	if !ok {
		return &OverLimitError{What: fmt.Sprintf("signal %s: no step waits and it cannot be kept", s.Name),
			Limit: "limits.max_kept_signals", Value: s.MaxKept, RetryAfter: retryAfter(next, now)}
	}
	return nil
}
