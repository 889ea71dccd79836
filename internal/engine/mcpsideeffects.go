package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/retry"
)

// A tool marked with side effects (mcp_servers.NAME.side_effects) must
// not run twice. Before such a call is sent, the step keeps a mark under
// the call's durable number (toolResult.Started); its result replaces the
// mark once it comes. A later attempt that finds the mark alone does not
// know whether the call took effect (its worker died during it), so it
// does not run it again: the step is dead-lettered (class handler) for a
// person to check, and the mark notes that (Held). Requeued, the step
// runs the call again (the person found it did not take effect);
// discarded, the workflow fails. A call that fails in a way that leaves
// its outcome unknown (the server died or timed out during it) is held
// the same way at once.

// unsettledCall is a side-effect call whose outcome is unknown.
type unsettledCall struct {
	ref, id string
	turn    int
	why     string
}

func (e *unsettledCall) Error() string {
	return fmt.Sprintf("tool %s (turn %d, call %s) has side effects and %s: it is not run again. "+
		"Check whether it took effect; requeue the step to run it again (enqueue dlq requeue), or discard it", e.ref, e.turn, e.id, e.why)
}

func (e *unsettledCall) Class() retry.Class { return retry.Handler }

// keep stores a mark for a call before the call is made: unlike save,
// it fails when the mark is not kept (Redis away past the step's lease),
// and the call is then not made. Under redis.durability the mark must be
// confirmed by the replicas too, since a failover that lost it would let
// a retry make the call again: an unconfirmed mark is written and waited
// for again until the replicas confirm it, while ctx (the call's, its
// deadline the server's timeout) leaves room for one more wait; past that
// the call is not made (markNotConfirmed).
func (d *durable) keep(ctx context.Context, seq int, hash string, value []byte) error {
	actx, cancel := answerContext(ctx)
	defer cancel()
	for waits := 0; ; waits++ {
		began := time.Now()
		err := untilStored(actx, func() error {
			return d.st.SaveCall(actx, d.wf, d.step, d.gen, d.attempt, seq, store.Call{Hash: hash, Value: string(value)})
		})
		switch {
		case err == nil:
			if waits > 0 {
				d.log.Info("side-effect call's mark confirmed by the replicas: making the call", "seq", seq, "waits", waits)
			}
			return nil
		case !errors.Is(err, store.ErrNotConfirmed):
			return fmt.Errorf("keep the mark of a side-effect call before making it: %w", err)
		}
		// another wait as long as this one must end before the call's time
		if dl, ok := ctx.Deadline(); ctx.Err() != nil || actx.Err() != nil || (ok && time.Until(dl) < 2*time.Since(began)) {
			return &markNotConfirmed{err: err, canceled: errors.Is(ctx.Err(), context.Canceled)}
		}
		if waits == 0 {
			d.log.Warn("side-effect call's mark not confirmed by the replicas: the call waits for them", "seq", seq)
		}
	}
}

// markNotConfirmed is a side-effect call not made: its mark was kept on
// the primary but not confirmed by the replicas within the call's time.
// The attempt ends without using one of the step's retries
// (retry.Unconfirmed), or as canceled when it was (the step canceled,
// the worker stopping).
type markNotConfirmed struct {
	err      error
	canceled bool
}

func (e *markNotConfirmed) Error() string {
	return "a side-effect call's mark was not confirmed by the replicas in time, so the call was not made: " + e.err.Error()
}
func (e *markNotConfirmed) Unwrap() error { return e.err }
func (e *markNotConfirmed) Class() retry.Class {
	if e.canceled {
		return retry.Canceled
	}
	return retry.Unconfirmed
}
