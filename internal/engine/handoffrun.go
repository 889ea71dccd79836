package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/store"
)

// A handed-on step's task run, and ended, as asynq's processor runs and
// ends a task.

// logPanic logs a step's panic with its stack (as asynq's processor does).
func (ho *Handoffs) logPanic(t *asynq.Task, err error) {
	var pe *panicError
	if errors.As(err, &pe) {
		ho.h.o.Logger.Error("a step panicked", "task", string(t.Payload()), "panic", store.Excerpt(pe.msg), "stack", pe.stack)
	}
}

// run runs handed-on task c in slot s and ends it as asynq's processor
// would: at its timeout, a cancel or a lapsed lease it is given up on
// (its run goes on unwatched, as asynq leaves it, and hands nothing on).
func (ho *Handoffs) run(c *claimed, s *slot) {
	defer ho.wg.Done()
	t := c.t
	now := ho.o.Now()
	ctx, cancel := context.WithCancelCause(ho.ctx)
	defer cancel(nil)
	ho.mu.Lock()
	ho.running[t.ID] = &handedOff{t: t, cancel: cancel, until: now.Add(store.TaskLease)}
	ho.mu.Unlock()
	defer func() {
		ho.mu.Lock()
		delete(ho.running, t.ID)
		ho.mu.Unlock()
	}()
	dl := taskDeadline(t, now)
	for _, d := range []time.Time{now.Add(c.timeout), s.until.Add(-handoffMargin)} {
		if d.Before(dl) {
			dl = d // its own timeout, within the slot's time
		}
	}
	rctx, rcancel := context.WithDeadline(ctx, dl)
	defer rcancel()
	rctx = withDelivery(context.WithValue(rctx, slotKey{}, s), delivery{taskID: t.ID, retried: t.Retried, maxRetry: t.Retry, handoff: true})
	task := asynq.NewTask(t.Type, t.Payload)
	done := make(chan error, 1)
	goPooled(func() { done <- process(rctx, ho.o.Run, task) })
	var err error
	select {
	case err = <-done:
	case <-rctx.Done():
		ho.giveUp(ctx, s)
		err = rctx.Err()
	}
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errAborted):
		ho.requeue(ctx, t)
	case errors.Is(cause, errLeaseOff):
		// asynq's recoverer has the task back: only the error handler hears
		if ho.o.ErrorHandler != nil {
			ho.o.ErrorHandler.HandleError(rctx, task, asynq.ErrLeaseExpired)
		}
	case err == nil:
		ho.end(ctx, t, func(ctx context.Context) error { return ho.h.st.CompleteTask(ctx, t) })
	default:
		ho.logPanic(task, err)
		if ho.o.ErrorHandler != nil {
			ho.o.ErrorHandler.HandleError(rctx, task, err)
		}
		switch {
		case errors.Is(err, asynq.RevokeTask):
			t.Retention = 0
			ho.end(ctx, t, func(ctx context.Context) error { return ho.h.st.CompleteTask(ctx, t) })
		case t.Retried >= t.Retry || errors.Is(err, asynq.SkipRetry):
			ho.end(ctx, t, func(ctx context.Context) error { return ho.h.st.ArchiveTask(ctx, t, err.Error()) })
		default:
			at := ho.o.Now().Add(ho.o.RetryDelay(t.Retried, err, task))
			failure := ho.o.IsFailure == nil || ho.o.IsFailure(err)
			ho.end(ctx, t, func(ctx context.Context) error { return ho.h.st.RetryTask(ctx, t, at, err.Error(), failure) })
		}
	}
}

// end writes how handed-off task t ended, trying again while Redis is
// away and its lease holds (as asynq's processor does); past the lease,
// asynq's recoverer has it back and the step's checkpoint answers that
// run.
func (ho *Handoffs) end(ctx context.Context, t *store.ClaimedTask, write func(context.Context) error) {
	ho.mu.Lock()
	until := ho.o.Now().Add(store.TaskLease)
	if r := ho.running[t.ID]; r != nil {
		until = r.until
	}
	ho.mu.Unlock()
	ctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), until) // written after a given-up run too
	defer cancel()
	if err := untilStored(ctx, func() error { return write(ctx) }); err != nil {
		ho.h.o.Logger.Warn("a handed-off step's task could not be ended; asynq recovers it when its lease lapses",
			"task", t.ID, "err", store.Excerpt(err.Error()))
	}
}

// process runs task with h under ctx; a panic is an error, as asynq
// makes it.
func process(ctx context.Context, h asynq.Handler, task *asynq.Task) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{msg: fmt.Sprint(r), stack: string(debug.Stack())}
		}
	}()
	return h.ProcessTask(ctx, task)
}

// panicError is a step's panic, recovered by ProcessTask or a hand-off's
// run (asynq's own is internal to it).
type panicError struct{ msg, stack string }

func (e *panicError) Error() string { return "panic error cause by: panic " + e.msg }

// taskDeadline is asynq's deadline for a task it starts at now: its
// timeout from now, or its deadline, whichever comes first; asynq's
// default 30 minutes without either.
func taskDeadline(t *store.ClaimedTask, now time.Time) time.Time {
	switch {
	case t.Timeout == 0 && t.Deadline == 0:
		return now.Add(30 * time.Minute)
	case t.Deadline == 0:
		return now.Add(time.Duration(t.Timeout) * time.Second)
	case t.Timeout == 0:
		return time.Unix(t.Deadline, 0)
	}
	return time.Unix(min(now.Unix()+t.Timeout, t.Deadline), 0)
}
