package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/retry"
	"github.com/agentq/agentq/tasks"
)

// HandleError implements asynq.ErrorHandler; the worker sets it as its
// server's ErrorHandler. It is the safety net for attempts the handler
// could not settle itself: it panicked, outlived the attempt's deadline
// (asynq gave up on it and its goroutine may still be running), or lost
// its lease. When asynq is archiving the task (its last retry, or
// SkipRetry), the step is settled dead with the reason, unless it already
// was, exactly as the handler's own dead-letter path does: the workflow
// is blocked, or an optional step's dependents go on. The attempt it ends
// is marked abandoned, so the goroutine of that attempt cannot record an
// outcome over it later.
func (h *Handler) HandleError(ctx context.Context, t *asynq.Task, err error) {
	if !tasks.RunsStep(t.Type()) {
		return
	}
	d := deliveryOf(ctx)
	taskID := d.taskID
	var attempt int
	if v, ok := h.attempts.LoadAndDelete(taskID); ok {
		attempt = v.(int)
	}
	if d.retried < d.maxRetry && !errors.Is(err, asynq.SkipRetry) {
		return // asynq retries it
	}
	var se *StepError
	if errors.As(err, &se) && (se.Class == retry.Busy || se.Class == retry.Stale || se.Class == retry.Unready) {
		return // a duplicate, an attempt the step has moved past, or one not begun: another settles it
	}
	if errors.Is(err, store.ErrOldLayout) {
		return // this worker cannot settle that record either
	}
	p, perr := tasks.DecodePayload(t.Payload())
	if perr != nil {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	wspec, serr := h.specs.get(sctx, h.st, p.Workflow)
	if serr != nil {
		return // gone, or never there: archived as it is
	}
	st, inst, ok := spec.StepOf(wspec, p.Step)
	if !ok {
		return
	}
	if w, err := h.st.Summary(sctx, p.Workflow); err != nil || w.Generation != p.Gen {
		return // a task of an earlier run (the workflow was rerun) settles nothing
	}
	class, reason := abandonedReason(err, spec.Resolve(wspec, st))
	h.settleAbandoned(sctx, p, wspec, st, inst, attempt, class, reason, "")
}

// abandonedReason is the class and readable reason of an error asynq
// archives a step task with.
func abandonedReason(err error, r spec.Resolved) (retry.Class, string) {
	var pe *panicError // ProcessTask's, or a hand-off's
	switch {
	case errors.As(err, &pe):
		return retry.Panic, "panic: " + pe.msg
	case asynq.IsPanicError(err):
		// asynq's text: "panic error cause by: panic [file:line]: message"
		msg := strings.TrimPrefix(err.Error(), "panic error cause by: ")
		return retry.Panic, "panic: " + strings.TrimPrefix(msg, "panic ")
	case errors.Is(err, context.DeadlineExceeded):
		return retry.Timeout, fmt.Sprintf("timeout: deadline exceeded: the attempt outlived the step's %s timeout and asynq gave up on it", r.Timeout)
	case errors.Is(err, asynq.ErrLeaseExpired):
		return retry.LeaseExpired, "lease_expired: the worker lost the task's lease on its last attempt (asynq: task lease expired)"
	}
	class := classOf(err)
	var se *StepError
	if errors.As(err, &se) {
		class = se.Class
	}
	msg := err.Error()
	if strings.HasPrefix(msg, string(class)+":") {
		return class, msg
	}
	return class, fmt.Sprintf("%s: %s", class, msg)
}

// settleAbandoned settles a step dead that asynq ended without the
// handler's word (HandleError, the reconciler): only if it is still open,
// and only if attempt (when positive) is still the step's latest. It
// reports whether it settled the step.
func (h *Handler) settleAbandoned(ctx context.Context, p tasks.Payload, wspec *spec.Spec, st *spec.Step, inst *spec.Instance, attempt int, class retry.Class, reason, reconciled string) bool {
	reason = store.Excerpt(reason)
	o := store.Outcome{Done: false, OnlyIfOpen: true, Optional: st.Optional, Error: reason, Class: string(class), Attempt: attempt}
	run := &stepRun{p: p, spec: wspec, st: st, r: spec.Resolve(wspec, st), attempt: attempt, inst: inst, log: stepLogger(h.o.Logger, p.Workflow, p.Step)}
	err := h.settleAs(ctx, run, o, class, reconciled)
	var se *StepError
	switch {
	case errors.Is(err, store.ErrAlreadySettled), errors.As(err, &se) && se.Class == retry.Stale:
		return false // the handler (or a newer attempt) got there first
	case err != nil:
		h.o.Logger.Error("could not settle a step asynq gave up on", "wf", p.Workflow, "step", p.Step, "class", class,
			"reason", reason, "err", store.Excerpt(err.Error()))
		return false
	}
	msg := "step dead-lettered: asynq archived its task without a result"
	if reconciled != "" {
		msg = "step dead-lettered by the reconciler: its task was archived or lost without a result"
	}
	h.o.Logger.Error(msg, "wf", p.Workflow, "step", p.Step, "attempt", attempt, "class", class, "err", reason, "alert", class == retry.Panic)
	return true
}
