package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/retry"
	"github.com/agentq/agentq/tasks"
)

// A signal step (wait_for: { signal, match, timeout }) waits for a signal
// sent from outside its workflow: when its inputs have settled, its task
// renders the match value, parks the step ("waiting", as an approval
// does: the workflow is waiting and the step holds no worker slot),
// schedules its timeout and registers it as a waiter of (signal, match),
// or takes a signal of that (signal, match) kept because no step waited
// when it was sent. A sender completes every step waiting at that moment
// with the signal's data as its output (producer.Client.Signal). The
// timeout's task dead-letters a step still waiting (an optional one lets
// the workflow go on); requeuing that dead letter waits again.

// signalRun runs a signal step's task, and its timeout's task.
type signalRun struct{}

func (signalRun) run(ctx context.Context, h *Handler, run *stepRun, a *store.Attempt, views map[string]spec.StepView) error {
	switch {
	case a.Step.State == store.StepDone:
		return nil // signaled
	case a.Step.State == store.StepWaiting && run.waitTimeout:
		return h.signalTimedOut(ctx, run, views)
	}
	// the first run, a redelivery of a step parked already (waiting again
	// changes nothing: a crash between parking and registering loses no
	// waiter), or a requeued dead letter
	return h.awaitSignal(ctx, run, views)
}

// signalOf renders signal step run's match value.
func signalOf(ctx context.Context, run *stepRun, views map[string]spec.StepView) (name, match string, err error) {
	match, err = spec.RenderData(ctx, spec.MatchTemplate(run.st), spec.DataOf(run.spec.Input, views, nil))
	if err != nil {
		return "", "", fmt.Errorf("wait_for.match: %w", err)
	}
	if len(match) > spec.MaxSignalMatch {
		return "", "", fmt.Errorf("wait_for.match renders %d bytes, over %d", len(match), spec.MaxSignalMatch)
	}
	return run.st.WaitFor.Signal, match, nil
}

// awaitSignal parks a signal step, schedules its timeout and registers
// it as a waiter, or completes it with a kept signal.
func (h *Handler) awaitSignal(ctx context.Context, run *stepRun, views map[string]spec.StepView) error {
	p := run.p
	name, match, err := signalOf(ctx, run, views)
	if err != nil {
		return h.deadLetter(ctx, run, retry.BadRequest, err)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	var state string
	if err := untilStored(sctx, func() (err error) {
		state, err = h.st.Wait(sctx, p.Workflow, p.Step, spec.SignalWaitText(name, match))
		return err
	}); err != nil {
		return fmt.Errorf("%w: %w", errNotRecorded, err)
	}
	if state == store.StateCanceled || state == store.StateTimedOut || state == store.StateFailed || state == store.StateCompleted {
		return nil // the workflow ended meanwhile: nothing waits
	}
	timeout := spec.SignalTimeout(run.st.WaitFor)
	if err := h.scheduleSignalTimeout(sctx, run, timeout); err != nil {
		return err
	}
	// the waiter set outlives every waiter in it; a stale member (its step
	// ended another way) is skipped and dropped by the next send
	w := store.Waiter{Workflow: p.Workflow, Step: p.Step, Gen: p.Gen, Attempt: run.attempt}
	kept, err := h.st.AwaitSignal(sctx, name, match, w, timeout+h.st.Retention())
	if err != nil {
		return err // retried: parking and registering again change nothing
	}
	run.log.Info("signal step waits", "signal", name, "timeout", timeout)
	h.o.Events(StepEvent{Workflow: p.Workflow, Step: p.Step, State: store.StepWaiting, WorkflowState: state, Attempt: run.attempt})
	if kept == nil {
		return nil
	}
	// the kept signal is this step's claim until it is completed: a retry
	// (this worker died, Redis did not answer) finds the same claim
	state, err = flow.Complete(sctx, h.st, h.o.Client, p.Workflow, run.spec, p.Step, p.Gen, run.attempt, kept.Data, "signal")
	switch {
	case errors.Is(err, flow.ErrNotWaiting):
		// the step stopped waiting in between (its workflow was canceled,
		// timed out or rerun): the signal goes to the steps that wait now,
		// or back to be kept
		sig := flow.SignalSend{Name: name, Match: match, ID: kept.ID, Data: kept.Data}
		if _, _, err := flow.DeliverSignal(sctx, h.st, h.o.Client, h.specOf, sig, nil, time.Until(kept.Lapse), time.Now()); err != nil {
			return err // retried: the claim is still this step's
		}
	case err != nil:
		return err // retried: the claim is still this step's
	default:
		run.log.Info("signal step took a kept signal", "signal", name, "id", kept.ID)
		if state != store.StateCompleted && state != store.StateBlocked { // else the end's task tells
			h.o.Events(StepEvent{Workflow: p.Workflow, Step: p.Step, State: store.StepDone, WorkflowState: state, Attempt: run.attempt, Target: "signal"})
		}
	}
	return h.st.ClaimDone(sctx, name, match, w)
}

// specOf reads a workflow's spec through the handler's cache.
func (h *Handler) specOf(ctx context.Context, wf string) (*spec.Spec, error) {
	return h.specs.get(ctx, h.st, wf)
}

// scheduleSignalTimeout enqueues the task that ends a signal step still
// waiting after timeout: one per attempt (a requeued dead letter waits
// again, with a timeout of its own), due at the next whole second after it
// (asynq keeps due times in whole seconds, rounded down).
func (h *Handler) scheduleSignalTimeout(ctx context.Context, run *stepRun, timeout time.Duration) error {
	p := run.p
	due := time.Now().Add(timeout)
	if due.Truncate(time.Second) != due {
		due = due.Truncate(time.Second).Add(time.Second)
	}
	payload, _ := json.Marshal(p)
	t := asynq.NewTask(tasks.TypeSignalTimeout, payload, asynq.TaskID(flow.SignalTimeoutTaskID(p.Workflow, p.Step, p.Gen, run.attempt)), asynq.Queue(flow.TaskQueue(p.Workflow, run.r)),
		asynq.ProcessAt(due), asynq.MaxRetry(spec.DefaultMaxRetries), asynq.Retention(h.st.Retention()))
	if _, err := h.o.Client.EnqueueContext(ctx, t); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("schedule the signal step's timeout: %w", err)
	}
	return nil
}

// signalTimedOut dead-letters a signal step still waiting at its timeout
// (settled only if it is still open: a signal that came first wins).
func (h *Handler) signalTimedOut(ctx context.Context, run *stepRun, views map[string]spec.StepView) error {
	p, st := run.p, run.st
	name, match, err := signalOf(ctx, run, views)
	if err != nil {
		match = "" // rendered when the step began waiting; the reason says so
	}
	reason := fmt.Sprintf("%s: no signal %s matching %q within %s", retry.Timeout, st.WaitFor.Signal, match, spec.SignalTimeout(st.WaitFor))
	o := store.Outcome{Done: false, OnlyIfOpen: true, Optional: st.Optional, Error: store.Excerpt(reason), Class: string(retry.Timeout), Attempt: run.attempt}
	if err := h.settle(ctx, run, o, retry.Timeout); errors.Is(err, store.ErrAlreadySettled) {
		return nil // signaled in time
	} else if err != nil {
		return err
	}
	if name != "" {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		defer cancel()
		_ = h.st.DoneWaiters(sctx, name, match, "", store.Waiter{Workflow: p.Workflow, Step: p.Step, Gen: p.Gen, Attempt: run.attempt}) // else the next send drops it
	}
	run.log.Error("signal step dead-lettered", "class", retry.Timeout, "err", reason)
	return fmt.Errorf("%s: %w", store.Excerpt(reason), asynq.SkipRetry)
}
