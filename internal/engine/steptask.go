package engine

// A step task's run: found and admitted, begun, attempted, ended.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/retry"
	"github.com/agentq/agentq/tasks"
)

// ProcessTask implements asynq.Handler.
//
// A step's attempt waits on its provider (for seconds) at the bottom of
// the worker's deepest stack, and a goroutine's stack is sized by its
// deepest moment: a worker holds one such stack per call in flight. So
// what is done before the attempt (admitStep, beginStep) and after it
// (afterAttempt) runs in functions of their own, whose frames are gone
// while it waits, and the frames that stay under the call are kept small.
func (h *Handler) ProcessTask(ctx context.Context, t *asynq.Task) (err error) {
	switch t.Type() {
	case tasks.TypeDeadline:
		return h.deadline(ctx, t)
	case tasks.TypeApprovalTimeout:
		return h.approvalTimeout(ctx, t)
	case tasks.TypeDecided:
		return h.decided(ctx, t)
	case tasks.TypeCancelTree:
		return h.cancelTree(ctx, t)
	}
	s, err := h.admitStep(ctx, t)
	if s == nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			// a panic is an error, as asynq and a hand-off make it
			// (process); asynq retries it: the slot is kept
			err = &panicError{msg: fmt.Sprint(r), stack: string(debug.Stack())}
			h.end(ctx, s.slot, errPanicked)
			return
		}
		h.end(ctx, s.slot, err)
	}()
	return h.runStep(ctx, t, s)
}

// admittedStep is a step task's step, found in its workflow's spec and
// admitted: its concurrency key's slot, if it has one, taken.
type admittedStep struct {
	p      tasks.Payload
	log    *slog.Logger
	wspec  *spec.Spec
	shaped bool // the input is read with the begin
	st     *spec.Step
	inst   *spec.Instance
	r      spec.Resolved
	taskID string
	slot   *keySlot
}

// admitStep finds step task t's step and admits it; nil, and the task's
// end, when it does not run now (a bad payload, an unknown workflow or
// step, a wait ended already, a key's slot not free).
//
//go:noinline
func (h *Handler) admitStep(ctx context.Context, t *asynq.Task) (*admittedStep, error) {
	p, err := tasks.DecodePayload(t.Payload())
	if err != nil {
		h.o.Logger.Error("step task dead-lettered: bad payload", "err", store.Excerpt(err.Error()))
		return nil, fmt.Errorf("%v: %w", err, asynq.SkipRetry)
	}
	log := stepLogger(h.o.Logger, p.Workflow, p.Step)
	wspec, shaped, err := h.specs.forTask(ctx, h.st, t.Type(), p)
	if errors.Is(err, store.ErrNotFound) {
		return nil, h.unknownWorkflow(log, p)
	}
	if err != nil {
		return nil, err
	}
	st, inst, ok := spec.StepOf(wspec, p.Step)
	if !ok {
		log.Error("step task dead-lettered: the workflow has no such step")
		return nil, fmt.Errorf("workflow %s has no step %q: %w", flow.BoundID(p.Workflow), flow.BoundID(p.Step), asynq.SkipRetry)
	}
	if t.Type() == tasks.TypeSignalTimeout || t.Type() == tasks.TypeChildEnded {
		if wanted, err := h.st.WaitEndWanted(ctx, p.Workflow, p.Step); err != nil || !wanted {
			return nil, err // settled already: delivered again, it starts nothing over
		}
	}
	r := spec.Resolve(wspec, st)
	taskID := deliveryOf(ctx).taskID
	slot, parked, err := h.admit(ctx, t, p, wspec, st, r, taskID, log)
	if err != nil || parked {
		return nil, err
	}
	return &admittedStep{p: p, log: log, wspec: wspec, shaped: shaped, st: st, inst: inst, r: r, taskID: taskID, slot: slot}, nil
}

// runStep begins admitted step s's attempt and runs it.
func (h *Handler) runStep(ctx context.Context, t *asynq.Task, s *admittedStep) error {
	run, a, actx, cancel, err := h.beginStep(ctx, t, s)
	if cancel != nil {
		defer cancel()
	}
	if run == nil {
		return err
	}
	return h.runAttempt(actx, t, run, a)
}

// beginStep begins admitted step s's attempt (its fencing, its inputs):
// the attempt to run, under its context and that context's cancel (nil
// for none); or no attempt, and the task's end.
//
//go:noinline
func (h *Handler) beginStep(ctx context.Context, t *asynq.Task, s *admittedStep) (*stepRun, *store.Attempt, context.Context, context.CancelFunc, error) {
	p, log, r := s.p, s.log, s.r
	var a *store.Attempt
	begin := h.st.Begin
	if s.shaped {
		begin = h.st.BeginReadingSpec
	}
	bctx, bcancel := context.WithTimeout(ctx, settleTimeout)
	err := untilStored(bctx, func() (err error) { // the same owner may take its own lease again
		a, err = begin(bctx, p.Workflow, p.Step, s.taskID, p.Gen, r.Timeout+settleTimeout, spec.InputsOf(s.st, s.inst))
		return err
	})
	bcancel()
	var busy *store.BusyError
	if errors.As(err, &busy) {
		// a duplicate delivery while another task runs the step: look again
		// soon (the checkpoint will answer once the step is done); this is
		// not a failure and uses no retry
		log.Info("step busy under another task; looking again shortly", "until", busy.Until)
		return nil, nil, nil, nil, &StepError{Class: retry.Busy, RetryAfter: min(time.Until(busy.Until), busyRecheck), Err: err}
	}
	var open *store.UnsettledInputError
	if errors.As(err, &open) {
		// on a Cluster a promotion lost an input's settle after this task
		// was enqueued: the input's own task settles it again; not an
		// attempt, and it uses no retry
		h.o.Events(StepEvent{Workflow: p.Workflow, Step: p.Step, Route: r.Route, State: string(retry.Unready), Class: retry.Unready, Err: err})
		if deliveryOf(ctx).last() || open.State == store.StepDead {
			// asynq would archive it, or its input was dead-lettered (the
			// workflow is blocked): its task goes instead, and the input's
			// settle (a requeue's) or the reconciler enqueues it again
			log.Warn("step not started: one of its inputs is not settled in the workflow's record; its task goes, to be enqueued again when the input settles", "input", open.Input)
			return nil, nil, nil, nil, fmt.Errorf("%w: %w", &StepError{Class: retry.Unready, Err: err}, asynq.RevokeTask)
		}
		log.Warn("step not started: one of its inputs is not settled in the workflow's record; looking again shortly", "input", open.Input)
		return nil, nil, nil, nil, &StepError{Class: retry.Unready, Delay: unreadyRecheck, Err: err}
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, nil, nil, h.unknownWorkflow(log, p)
	}
	if errors.Is(err, store.ErrOtherRun) {
		log.Info("step task of another run of the workflow (it was rerun): nothing to do", "err", err)
		return nil, nil, nil, nil, nil
	}
	if errors.Is(err, store.ErrOldLayout) {
		// kept in the dead-letter queue, not dropped: requeue it once a
		// worker of the version that wrote it runs
		log.Error("step task dead-lettered", "err", err)
		return nil, nil, nil, nil, fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	if err != nil {
		return nil, nil, nil, nil, err
	}
	wspec := s.wspec
	if s.shaped {
		if wspec, err = h.specs.complete(p.Workflow, wspec, a.Spec); err != nil {
			log.Error("step task dead-lettered", "err", err)
			return nil, nil, nil, nil, err
		}
	}
	if a.WorkflowState == store.StateCanceled || a.WorkflowState == store.StateTimedOut || a.WorkflowState == store.StateFailed {
		log.Info("step skipped: workflow " + a.WorkflowState)
		return nil, nil, nil, nil, nil
	}
	if pastDeadline(a.DeadlineAt) {
		log.Info("step not started: the workflow's deadline passed")
		return nil, nil, nil, nil, h.timeOut(ctx, p.Workflow, wspec, "")
	}
	ctx = withBudget(ctx, p.Workflow, wspec)
	var cancel context.CancelFunc
	if a.DeadlineAt != nil { // the attempt ends at the workflow's deadline, if that comes first
		ctx, cancel = context.WithDeadline(ctx, *a.DeadlineAt)
	}
	if s.inst != nil {
		if s.inst.Item, err = spec.DecodeItem(a.Item); err != nil {
			log.Error("step task dead-lettered", "err", err)
			return nil, nil, nil, cancel, fmt.Errorf("%s: %w: %w", flow.BoundID(p.Step), err, asynq.SkipRetry)
		}
	}
	h.attempts.Store(s.taskID, a.Step.Attempts)
	run := &stepRun{p: p, spec: wspec, st: s.st, r: r, attempt: a.Step.Attempts, inst: s.inst, log: log, deadline: a.DeadlineAt,
		waitTimeout: t.Type() == tasks.TypeSignalTimeout, childEnded: t.Type() == tasks.TypeChildEnded}
	return run, a, ctx, cancel, nil
}

// runAttempt runs attempt a of run under its span.
func (h *Handler) runAttempt(ctx context.Context, t *asynq.Task, run *stepRun, a *store.Attempt) error {
	ctx, span := flow.StepContext(ctx, run.p, run.r.Route, a.Step.Attempts)
	defer span.End()
	err := h.process(h.withStepLog(ctx, run), run, a)
	return h.afterAttempt(ctx, run, a, span, err)
}

// afterAttempt is how attempt a of run ended with err: the workflow's
// deadline, a cancel of its workflow, or err itself.
//
//go:noinline
func (h *Handler) afterAttempt(ctx context.Context, run *stepRun, a *store.Attempt, span trace.Span, err error) error {
	if err != nil && endsWithDeadline(ctx, a.DeadlineAt) {
		return h.timeOut(ctx, run.p.Workflow, run.spec, "") // not retried: the workflow is over
	}
	if err != nil && classOf(err) == retry.Canceled && h.workflowStopped(ctx, run.p.Workflow) {
		run.log.Info("step stopped: its workflow was canceled or timed out")
		err = nil // not retried: nothing of the workflow runs any more
	}
	if err != nil {
		span.SetStatus(codes.Error, store.Excerpt(err.Error()))
	} else {
		h.attempts.CompareAndDelete(deliveryOf(ctx).taskID, a.Step.Attempts) // HandleError is not called on success
	}
	return err
}

// unknownWorkflow dead-letters a step task whose workflow does not exist
// (it expired, was never written, or the payload names another
// deployment's): archived with the reason, never silently completed.
func (h *Handler) unknownWorkflow(log *slog.Logger, p tasks.Payload) error {
	log.Error("step task dead-lettered: workflow not found (expired or never written)")
	return fmt.Errorf("workflow %s not found (expired or never written): %w", flow.BoundID(p.Workflow), asynq.SkipRetry)
}

// process runs one attempt of a step that Begin let through: its inputs'
// views, then its kind's attempt.
func (h *Handler) process(ctx context.Context, run *stepRun, a *store.Attempt) error {
	views := make(map[string]spec.StepView, len(a.Deps))
	for id, d := range a.Deps {
		views[id] = spec.ViewOf(run.spec, id, d.Output, d.Degraded, d.State != store.StepDone)
	}
	if err := h.loadMapViews(ctx, run, a, views); err != nil {
		if ctx.Err() != nil {
			return &StepError{Class: retry.Canceled, Err: ctx.Err()}
		} else if errors.Is(err, errMapViewTooLarge) {
			return h.deadLetter(ctx, run, retry.BadRequest, err)
		}
		return err // Redis did not answer: retried
	}
	r := runnerOf(run.st)
	if r == nil { // a kind registered with spec.RegisterKind alone: nothing here runs it
		return fmt.Errorf("step %s: no worker side for its kind %q (register kinds with both sides): %w", flow.BoundID(run.st.ID), spec.KindOf(run.st).Name(), asynq.SkipRetry)
	}
	return r.run(ctx, h, run, a, views)
}

// workflowStopped reports whether a step whose context was canceled was
// stopped by its workflow's cancel or deadline (then the attempt ends
// there), not by the worker shutting down (then it comes back). It reads
// the workflow's state with a context of its own: the step's is done.
func (h *Handler) workflowStopped(ctx context.Context, wf string) bool {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	w, err := h.st.Summary(rctx, wf)
	return err == nil && (w.State == store.StateCanceled || w.State == store.StateTimedOut)
}
