package engine

import (
	"context"
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

// A workflow's deadline (the spec's deadline:, or the submit's
// WithDeadline) bounds the whole workflow: every attempt's context ends
// at it, no step starts after it, and a task scheduled for it ends the
// workflow as timed_out, its unfinished steps canceled (queued tasks
// deleted, running ones' contexts canceled).

// deadline runs a tasks.TypeDeadline task: the workflow times out, unless it
// ended first.
func (h *Handler) deadline(ctx context.Context, t *asynq.Task) error {
	p, err := tasks.DecodePayload(t.Payload())
	if err != nil {
		return fmt.Errorf("%v: %w", err, asynq.SkipRetry)
	}
	wspec, err := h.specs.get(ctx, h.st, p.Workflow)
	if errors.Is(err, store.ErrNotFound) {
		return nil // expired or deleted: nothing to end
	}
	if err != nil {
		return err
	}
	st, err := h.st.Summary(ctx, p.Workflow)
	if err != nil {
		return err
	}
	if st.DeadlineAt != nil && !pastDeadline(st.DeadlineAt) {
		// early (another worker's clock): look again once it has passed
		return &StepError{Class: retry.Busy, RetryAfter: time.Until(*st.DeadlineAt) + 100*time.Millisecond,
			Err: errors.New("the workflow's deadline has not passed yet")}
	}
	return h.timeOut(ctx, p.Workflow, wspec, "")
}

// timeOut ends a workflow whose deadline passed (tooOld empty), or that
// is open past limits.max_open_age (tooOld says so): timed_out, its
// unfinished steps canceled and their tasks stopped (the calling task's
// own included: it returns once this does).
func (h *Handler) timeOut(ctx context.Context, wf string, wspec *spec.Spec, tooOld string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	ids := make([]string, len(wspec.Steps))
	for i, st := range wspec.Steps {
		ids[i] = st.ID
	}
	var (
		state string
		ended bool
		err   error
	)
	if tooOld == "" {
		state, ended, err = h.st.TimeOut(ctx, wf, ids)
	} else {
		state, ended, err = h.st.TimeOutOpen(ctx, wf, ids, tooOld)
	}
	if err != nil || state != store.StateTimedOut {
		return err
	}
	self := deliveryOf(ctx).taskID
	insp := asynq.NewInspectorFromRedisClient(h.o.Redis)
	errs := flow.StopTasks(insp, flow.TasksOf(ctx, h.st, wf, wspec), self)
	if tooOld == "" {
		h.o.Logger.Warn("workflow timed out: its deadline passed", "wf", wf)
	} else {
		h.o.Logger.Warn("workflow timed out: "+tooOld, "wf", wf)
	}
	if ended { // counted once, by the caller that ended it
		h.o.Events(StepEvent{Workflow: wf, State: store.StateTimedOut, WorkflowState: store.StateTimedOut})
	}
	h.notifyEnded(ctx, wf, wspec, store.StateTimedOut)
	if len(errs) > 0 {
		h.o.Logger.Warn("some tasks of a timed-out workflow could not be stopped (they stop at their next start)", "wf", wf, "err", errors.Join(errs...))
	}
	return nil
}

// pastDeadline says whether a workflow's deadline (nil: none) has passed.
func pastDeadline(at *time.Time) bool { return at != nil && !time.Now().Before(*at) }

// deadlineSlack is how close to the workflow's deadline a failed attempt
// counts as ended by it: calls stop a settle margin (at most 2s) early.
const deadlineSlack = 2*time.Second + 100*time.Millisecond

// endsWithDeadline says whether an attempt that failed now was ended by
// the workflow's deadline (at; nil: none): past it, or within the settle
// margin of it, in which case it waits for it (ctx ends there).
func endsWithDeadline(ctx context.Context, at *time.Time) bool {
	if at == nil || time.Until(*at) > deadlineSlack {
		return false
	}
	<-ctx.Done() // bounded by the deadline itself
	return pastDeadline(at)
}
