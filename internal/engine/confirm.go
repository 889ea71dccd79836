package engine

import (
	"context"
	"time"

	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/retry"
)

// unconfirmedRecheck is how soon the task of a step whose outcome was not
// confirmed by the replicas (redis.durability) comes back to confirm it.
const unconfirmedRecheck = 2 * time.Second

// notConfirmed is what an attempt returns to asynq when its outcome
// reached the Redis primary but not the replicas redis.durability asks
// for. Everything the settle made ready was enqueued (the workflow goes
// on, on that primary), but the task is not acknowledged: a promotion of
// a replica without the outcome would find the step open and its task
// gone. It comes back after unconfirmedRecheck, using none of the
// step's retries, finds the step settled (the checkpoint), settles it
// again and so confirms it; or, should a promotion have lost it, runs it
// again, the answer taken from this worker's memory when it runs here.
// what names the write (an outcome, an expansion, a key's slot).
// On the task's last delivery it returns nil instead: asynq archives such
// a task whatever the error, so the caller goes on with what the primary
// holds, as without the option, and a warning says so.
func (h *Handler) notConfirmed(ctx context.Context, run *stepRun, what string, err error) error {
	if deliveryOf(ctx).last() {
		run.log.Warn(what+" not confirmed by the replicas on the task's last retry: going on as the primary holds it",
			"attempt", run.attempt, "err", store.Excerpt(err.Error()))
		return nil
	}
	run.log.Warn(what+" not confirmed by the replicas: the step's task is not acknowledged and comes back to confirm it",
		"attempt", run.attempt, "err", store.Excerpt(err.Error()))
	h.o.Events(StepEvent{Workflow: run.p.Workflow, Step: run.p.Step, Route: run.r.Route, State: string(retry.Unconfirmed),
		Attempt: run.attempt, Class: retry.Unconfirmed, Err: err})
	return &StepError{Class: retry.Unconfirmed, Delay: unconfirmedRecheck, Err: err}
}
