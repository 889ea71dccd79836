package producer

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/store"
)

// Cancel stops a workflow: it is marked canceled (no further step is
// enqueued), its queued tasks are deleted and its running steps see their
// context canceled; its child workflows are canceled too, and, if it is a
// child, its parent step is told. It returns the workflow's state after
// the call (a workflow that already ended keeps its state).
func (c *Client) Cancel(ctx context.Context, id string) (string, error) {
	return c.cancel(ctx, id, 0)
}

// cancelChildren cancels the child workflows workflow id's steps started
// (and theirs), those that still run.
func (c *Client) cancelChildren(ctx context.Context, id string, depth int) error {
	children, err := c.store.Children(ctx, id)
	if err != nil {
		return err
	}
	var errs []error
	for _, child := range children {
		if depth >= flow.MaxChildDepth {
			return fmt.Errorf("child workflow %s: over %d levels of children: not canceled", child, flow.MaxChildDepth)
		}
		if w, err := c.store.Summary(ctx, child); err != nil || record.Terminal(w.State) {
			continue // gone, or ended: nothing to stop (its own children were handled when it ended)
		}
		if _, err := c.cancel(ctx, child, depth+1); err != nil && !errors.Is(err, store.ErrNotFound) {
			errs = append(errs, fmt.Errorf("child workflow %s: %w", child, err))
		}
	}
	return errors.Join(errs...)
}

func (c *Client) cancel(ctx context.Context, id string, depth int) (_ string, err error) {
	wspec, err := c.spec(ctx, id)
	if err != nil {
		return "", err
	}
	ids := make([]string, len(wspec.Steps))
	for i, st := range wspec.Steps {
		ids[i] = st.ID
	}
	state, err := c.store.Cancel(ctx, id, ids)
	// not confirmed: canceled on the primary all the same; its tasks are
	// stopped as for any cancel, and the caller is told at the end
	err, unconfirmed := store.Unconfirmed(err)
	if err != nil {
		return state, err
	}
	if unconfirmed != nil {
		defer func() {
			if err == nil {
				err = unconfirmed
			}
		}()
	}
	if state != record.StateCanceled { // ended already; its children, if any still run, go now
		return state, c.cancelChildren(ctx, id, depth)
	}
	errs := flow.StopTasks(c.insp, flow.TasksOf(ctx, c.store, id, wspec), "")
	if err := flow.NotifyEnd(ctx, c.asynq, c.store, c.o.Webhooks, id, wspec, record.StateCanceled); err != nil {
		errs = append(errs, fmt.Errorf("webhook: %w", err))
	}
	if err := flow.TellParent(ctx, c.asynq, c.store, id, record.StateCanceled); err != nil {
		errs = append(errs, err)
	}
	if err := c.cancelChildren(ctx, id, depth); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return state, fmt.Errorf("workflow %s canceled, but some of its tasks could not be stopped (they will stop at their next start): %w", id, errors.Join(errs...))
	}
	return state, nil
}
