package flow

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/tasks"
)

// ErrNotWaiting is returned for a decision or a signal on a step that is
// not waiting for one (decided or signaled already, never reached, or its
// workflow ended).
var ErrNotWaiting = errors.New("the step is not waiting for a decision or a signal")

// Decide records a decision on a waiting approval step of run gen (-1: the
// current run, a person's decision) and enqueues the dependents it made
// ready; ErrNotWaiting if the step was not waiting, or is waiting in
// another run (an earlier run's timeout does not decide a rerun's step).
func Decide(ctx context.Context, st *store.Store, c *asynq.Client, wf string, wspec *spec.Spec, step string, gen int, d spec.Decision) (string, error) {
	out, _ := json.Marshal(d)
	return Complete(ctx, st, c, wf, wspec, step, gen, 0, string(out), "approval")
}

// Complete settles a waiting step (an approval's decision, a signal's
// data) of run gen (-1: the current run) and attempt attempt (0: any) as
// done with output, by what target names, only if it is waiting
// (ErrNotWaiting if it is not, or waits in another run or attempt),
// enqueues the dependents it made ready and, if it ended the workflow,
// the end's task. A Complete delivered again finds the step settled:
// ErrNotWaiting, and nothing is done twice.
func Complete(ctx context.Context, st *store.Store, c *asynq.Client, wf string, wspec *spec.Spec, step string, gen, attempt int, output, target string) (string, error) {
	res, err := st.Settle(ctx, wf, step, store.Outcome{Done: true, Decided: true, Output: output, Target: target, Gen: gen, Attempt: attempt},
		DependentsOf(wspec, step))
	if errors.Is(err, store.ErrOtherRun) || errors.Is(err, store.ErrStaleAttempt) {
		return "", fmt.Errorf("workflow %s step %s: %w: %w", wf, step, ErrNotWaiting, err)
	}
	if errors.Is(err, store.ErrAlreadySettled) {
		return res.State, fmt.Errorf("workflow %s step %s: %w", wf, step, ErrNotWaiting)
	}
	// not confirmed by the replicas: completed on the primary all the same;
	// what it made ready is enqueued, and the caller is told at the end
	err, unconfirmed := store.Unconfirmed(err)
	if err != nil {
		return "", err
	}
	var ready []string
	for i, dep := range res.Ready {
		if i >= len(res.Enqueued) || !res.Enqueued[i] {
			ready = append(ready, dep)
		}
	}
	ts, err := StepTasks(wf, wspec, ready, res.Gen, st.Retention())
	if err != nil {
		return res.State, err
	}
	err, notYet := store.Unconfirmed(Enqueue(ctx, st, c, ts...))
	if err != nil {
		return res.State, err
	}
	unconfirmed = cmp.Or(unconfirmed, notYet)
	if res.State == record.StateCompleted || res.State == record.StateBlocked {
		err, notYet := store.Unconfirmed(Enqueue(ctx, st, c, decidedTask(wf, wspec, step, res.Gen, st.Retention())))
		if err != nil {
			return res.State, fmt.Errorf("workflow %s step %s completed from outside, but its end could not be handed to a worker (no webhook or count): %w", wf, step, err)
		}
		unconfirmed = cmp.Or(unconfirmed, notYet)
	}
	return res.State, unconfirmed
}

// decidedTask hands the end a decision or a signal brought to a worker
// (tasks.TypeDecided), on the step's queue; once per step and run.
func decidedTask(wf string, wspec *spec.Spec, step string, gen int, retention time.Duration) store.Task {
	s, _ := wspec.Step(step)
	payload, _ := json.Marshal(tasks.Payload{Workflow: wf, Step: step, Gen: gen})
	return store.Task{ID: StepTaskID(wf, step, gen) + ":decided", Queue: TaskQueue(wf, spec.Resolve(wspec, s)), Type: tasks.TypeDecided,
		Payload: payload, MaxRetry: spec.DefaultMaxRetries, Retention: retention}
}
