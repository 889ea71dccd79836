package producer

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// Cancel stops a workflow: it is marked canceled (no further step is
// enqueued), its queued tasks are deleted and its running steps see their
// context canceled, and, if it is a child, its parent step is told. The
// workflows under it (its children, theirs) are canceled by a worker: a
// tasks.TypeCancelTree task, enqueued before the mark (so a crash between
// the two cannot lose it: the task cancels the workflow too), so the call
// returns at once however wide the tree. It returns the workflow's state
// after the call (a workflow that already ended keeps its state; its
// children that still run are canceled all the same).
func (c *Client) Cancel(ctx context.Context, id string) (_ string, err error) {
	wspec, err := c.spec(ctx, id)
	if err != nil {
		return "", err
	}
	var unconfirmed error
	if flow.MayHaveChildren(wspec) {
		if err := c.cancelTree(ctx, id, wspec); err != nil {
			if err, unconfirmed = store.Unconfirmed(err); err != nil {
				return "", fmt.Errorf("workflow %s not canceled: %w", id, err)
			}
		}
	}
	ids := make([]string, len(wspec.Steps))
	for i, st := range wspec.Steps {
		ids[i] = st.ID
	}
	// the tasks to stop, read before the cancel marks every unfinished
	// map instance canceled: those parked (waiting for a child, a signal,
	// a person) have no task to stop, and a map of thousands of them is
	// canceled without a look at each (flow.TasksOf)
	tasks := flow.TasksOf(ctx, c.store, id, wspec)
	state, err := c.store.Cancel(ctx, id, ids)
	// not confirmed: canceled on the primary all the same; its tasks are
	// stopped as for any cancel, and the caller is told at the end
	err, uc := store.Unconfirmed(err)
	if err != nil {
		return state, err
	}
	if unconfirmed == nil {
		unconfirmed = uc
	}
	if unconfirmed != nil {
		defer func() {
			if err == nil {
				err = unconfirmed
			}
		}()
	}
	if state != record.StateCanceled {
		return state, nil // ended already
	}
	errs := flow.StopTasks(c.insp, tasks, "")
	if err := flow.NotifyEnd(ctx, c.asynq, c.store, c.o.Webhooks, id, wspec, record.StateCanceled); err != nil {
		errs = append(errs, fmt.Errorf("webhook: %w", err))
	}
	if err := flow.TellParent(ctx, c.asynq, c.store, id, record.StateCanceled); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return state, fmt.Errorf("workflow %s canceled, but some of its tasks could not be stopped (they will stop at their next start): %w", id, errors.Join(errs...))
	}
	return state, nil
}

// cancelChildren has the workflows under workflow id (which ended: a
// discarded dead letter failed it) canceled by a worker.
func (c *Client) cancelChildren(ctx context.Context, id string, _ int) error {
	wspec, err := c.spec(ctx, id)
	if err != nil || !flow.MayHaveChildren(wspec) {
		return err
	}
	return c.cancelTree(ctx, id, wspec)
}

// cancelTree enqueues the task that cancels workflow id's run and every
// workflow under it (confirmed on the queue's primary with durability on).
func (c *Client) cancelTree(ctx context.Context, id string, wspec *spec.Spec) error {
	w, err := c.store.Summary(ctx, id)
	if err != nil {
		return err
	}
	if err := flow.Enqueue(ctx, c.store, c.asynq, flow.CancelTreeTask(id, w.Generation, wspec, c.store.Retention())); err != nil {
		return fmt.Errorf("the cancel of the workflows under %s: %w", id, err)
	}
	return nil
}
