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

// Enqueue enqueues the tasks an acknowledging write made ready and left to
// its caller (a settle's, a submit's, a rerun's, a decision's): through
// the store when it confirms them (durability on: store.EnqueueTasks,
// each queue's tasks confirmed on its primary as the write was on its
// own), else with asynq's client, one by one, as ever. A task whose id
// exists is success. Tasks not confirmed are enqueued all the same: the
// answer is then an ErrNotConfirmed for the caller to report at the end
// (store.Unconfirmed). A scheduled task (asynq's ProcessAt) is not one of
// these: it stays with asynq's client.
func Enqueue(ctx context.Context, st *store.Store, c *asynq.Client, ts ...store.Task) error {
	if st.ConfirmsTasks() {
		return st.EnqueueTasks(ctx, ts...)
	}
	for _, t := range ts {
		if err := enqueueWith(ctx, c, t.ID, asynqTask(t)); err != nil {
			return err
		}
	}
	return nil
}

// StepTasks are the tasks of steps in run gen of workflow wf.
func StepTasks(wf string, wspec *spec.Spec, steps []string, gen int, retention time.Duration) ([]store.Task, error) {
	out := make([]store.Task, 0, len(steps))
	for _, step := range steps {
		st, ok := wspec.Step(step)
		if !ok {
			return nil, fmt.Errorf("workflow %s has no step %q", wf, step)
		}
		out = append(out, QueuedTask(wf, step, gen, wspec, st, retention))
	}
	return out, nil
}

// EnqueueInstance enqueues instance n of map step st with asynq's client
// (not confirmed: a map's expansion is not an acknowledging write); an
// existing task with its id is success.
func EnqueueInstance(ctx context.Context, c *asynq.Client, wf string, wspec *spec.Spec, st *spec.Step, n, gen int, retention time.Duration) error {
	t, err := NewTask(wf, record.InstanceID(st.ID, n), gen, wspec, st, retention)
	if err != nil {
		return err
	}
	return enqueueWith(ctx, c, StepTaskID(wf, record.InstanceID(st.ID, n), gen), t)
}

// EnqueueStep enqueues one step with asynq's client (not confirmed: a
// child workflow's roots); an existing task with its id is success.
func EnqueueStep(ctx context.Context, c *asynq.Client, wf string, wspec *spec.Spec, step string, gen int, retention time.Duration) error {
	st, ok := wspec.Step(step)
	if !ok {
		return fmt.Errorf("workflow %s has no step %q", wf, step)
	}
	t, err := newStepTask(wf, wspec, st, gen, retention)
	if err != nil {
		return err
	}
	return enqueueWith(ctx, c, StepTaskID(wf, step, gen), t)
}

// asynqTask is t as asynq's client enqueues it (for a step's task, the
// one NewTask builds).
func asynqTask(t store.Task) *asynq.Task {
	opts := []asynq.Option{asynq.TaskID(t.ID), asynq.Queue(t.Queue), asynq.MaxRetry(t.MaxRetry), asynq.Retention(t.Retention)}
	if t.Timeout > 0 {
		opts = append(opts, asynq.Timeout(t.Timeout))
	}
	return asynq.NewTask(t.Type, t.Payload, opts...)
}

// enqueueWith enqueues task id with asynq's client; an existing task with
// its id is success.
func enqueueWith(ctx context.Context, c *asynq.Client, id string, t *asynq.Task) error {
	if _, err := c.EnqueueContext(ctx, t); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("enqueue %s: %w", id, err)
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
