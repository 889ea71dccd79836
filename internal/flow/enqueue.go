package flow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// EnqueueInstance enqueues instance n of map step st; an existing task
// with its id is success.
func EnqueueInstance(ctx context.Context, c *asynq.Client, wf string, wspec *spec.Spec, st *spec.Step, n, gen int, retention time.Duration) error {
	t, err := NewTask(wf, record.InstanceID(st.ID, n), gen, wspec, st, retention)
	if err != nil {
		return err
	}
	if _, err := c.EnqueueContext(ctx, t); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("enqueue %s: %w", StepTaskID(wf, record.InstanceID(st.ID, n), gen), err)
	}
	return nil
}

// EnqueueStep enqueues one step; an existing task with its id is success.
func EnqueueStep(ctx context.Context, c *asynq.Client, wf string, wspec *spec.Spec, step string, gen int, retention time.Duration) error {
	st, ok := wspec.Step(step)
	if !ok {
		return fmt.Errorf("workflow %s has no step %q", wf, step)
	}
	t, err := newStepTask(wf, wspec, st, gen, retention)
	if err != nil {
		return err
	}
	if _, err := c.EnqueueContext(ctx, t); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("enqueue %s: %w", StepTaskID(wf, step, gen), err)
	}
	return nil
}

// DependentsOf lists a step's dependents with their number of inputs.
func DependentsOf(wspec *spec.Spec, id string) []store.Dependent {
	ds := wspec.Dependents(id)
	out := make([]store.Dependent, 0, len(ds))
	for _, d := range ds {
		st, _ := wspec.Step(d)
		out = append(out, store.Dependent{ID: d, Inputs: len(st.DependsOn)})
	}
	return out
}
