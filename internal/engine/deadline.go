package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/retry"
	"github.com/agentq/agentq/tasks"
)

// A workflow's deadline (the spec's deadline:, or the submit's
// WithDeadline) bounds the whole workflow: every attempt's context ends
// at it, no step starts after it, and a task scheduled for it ends the
// workflow as timed_out, its unfinished steps canceled (queued tasks
// deleted, running ones' contexts canceled).

// WithDeadline bounds the submitted workflow to d from now (instead of its
// spec's deadline).
func WithDeadline(d time.Duration) SubmitOption {
	return func(s *SubmitSettings) { s.Deadline = d }
}

// deadlineAt is when a workflow submitted now times out; zero: never.
func (c *Client) deadlineAt(spec *Spec, set SubmitSettings) time.Time {
	d := set.Deadline
	if d <= 0 {
		d = time.Duration(spec.Deadline)
	}
	if d <= 0 {
		return time.Time{}
	}
	return c.now().Add(d)
}

func (c *Client) now() time.Time {
	if c.o.Now != nil {
		return c.o.Now()
	}
	return time.Now()
}

// scheduleDeadline enqueues the task that ends workflow id at at (nothing
// for a zero at); one that exists already is success.
func (c *Client) scheduleDeadline(ctx context.Context, id string, spec *Spec, at time.Time) error {
	if at.IsZero() {
		return nil
	}
	payload, _ := json.Marshal(tasks.Payload{Workflow: id, Step: "deadline"})
	queue := spec.Defaults.Queue
	if queue == "" {
		queue = DefaultQueue
	}
	// asynq schedules by whole seconds: the task is due at the second
	// after the deadline, never before it
	due := at.Truncate(time.Second).Add(time.Second)
	t := asynq.NewTask(tasks.TypeDeadline, payload, asynq.TaskID(id+":deadline"), asynq.Queue(queue), asynq.ProcessAt(due),
		asynq.MaxRetry(DefaultMaxRetries), asynq.Timeout(time.Minute), asynq.Retention(c.o.Retention))
	if _, err := c.asynq.EnqueueContext(ctx, t); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("schedule the deadline of %s: %w", id, err)
	}
	return nil
}

// deadline runs a tasks.TypeDeadline task: the workflow times out, unless it
// ended first.
func (h *Handler) deadline(ctx context.Context, t *asynq.Task) error {
	p, err := tasks.DecodePayload(t.Payload())
	if err != nil {
		return fmt.Errorf("%v: %w", err, asynq.SkipRetry)
	}
	spec, err := h.specs.get(ctx, h.st, p.Workflow)
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
	return h.timeOut(ctx, p.Workflow, spec)
}

// timeOut ends a workflow whose deadline passed: timed_out, its
// unfinished steps canceled and their tasks stopped (the calling task's
// own included: it returns once this does).
func (h *Handler) timeOut(ctx context.Context, wf string, spec *Spec) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	ids := make([]string, len(spec.Steps))
	for i, st := range spec.Steps {
		ids[i] = st.ID
	}
	state, ended, err := h.st.TimeOut(ctx, wf, ids)
	if err != nil || state != store.StateTimedOut {
		return err
	}
	self, _ := asynq.GetTaskID(ctx)
	insp := asynq.NewInspectorFromRedisClient(h.o.Redis)
	errs := stopTasks(insp, tasksOf(ctx, h.st, wf, spec), self)
	h.o.Logger.Warn("workflow timed out: its deadline passed", "wf", wf)
	if ended { // counted once, by the caller that ended it
		h.o.Events(StepEvent{Workflow: wf, State: store.StateTimedOut, WorkflowState: store.StateTimedOut})
	}
	h.notifyEnded(ctx, wf, spec, store.StateTimedOut)
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
