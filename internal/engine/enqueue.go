package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// enqueueInstance enqueues instance n of map step st; an existing task
// with its id is success.
func enqueueInstance(ctx context.Context, c *asynq.Client, wf string, spec *Spec, st *Step, n, gen int, retention time.Duration) error {
	t, err := newTask(wf, instanceID(st.ID, n), gen, spec, st, retention)
	if err != nil {
		return err
	}
	if _, err := c.EnqueueContext(ctx, t); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("enqueue %s: %w", StepTaskID(wf, instanceID(st.ID, n), gen), err)
	}
	return nil
}

// enqueueStep enqueues one step; an existing task with its id is success.
func enqueueStep(ctx context.Context, c *asynq.Client, wf string, spec *Spec, step string, gen int, retention time.Duration) error {
	st, ok := spec.Step(step)
	if !ok {
		return fmt.Errorf("workflow %s has no step %q", wf, step)
	}
	t, err := newStepTask(wf, spec, st, gen, retention)
	if err != nil {
		return err
	}
	if _, err := c.EnqueueContext(ctx, t); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("enqueue %s: %w", StepTaskID(wf, step, gen), err)
	}
	return nil
}
