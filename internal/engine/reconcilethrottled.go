package engine

// The reconciler's look at throttled steps: a step waiting for a slot of
// its concurrency key has no task, only its place in the key's line
// (store/keyslots.go), and a place lost to a Redis promotion, or a grant
// given up on, would leave it waiting for ever.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// rewaitEvery is how often, at most, the reconciler enqueues again the
// task of one throttled step that lost its place in line.
const rewaitEvery = 10 * time.Minute

// throttled looks for a throttled step's place in its concurrency key's
// line, and enqueues its task again (a new id: its first task ended) if
// the place is gone: a promotion of the keys' primary that did not have
// it, or a grant given up on. The new task acquires a slot or waits in
// line again; a duplicate of it waits once, and Begin's lease and
// checkpoint keep the step from running twice.
func (r *Reconciler) throttled(ctx context.Context, wf string, wspec *spec.Spec, st *spec.Step, id string, gen int, c *ReconcileCounts) error {
	cc := spec.ConcurrencyOf(wspec, st)
	if cc == nil {
		return nil
	}
	key, err := spec.RenderKey(ctx, cc, wspec.Input)
	if err != nil {
		return nil // dead-lettered by its own task already
	}
	known, err := r.h.st.SlotHolderKnown(ctx, store.SlotHolder{Key: key, Workflow: wf, Step: id, Gen: gen})
	if err != nil || known {
		return err
	}
	res := spec.Resolve(wspec, st)
	sctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	// one task per step and rewaitEvery, however many passes find it
	// before it runs (a backlogged queue): a duplicate would only wait in
	// line once more
	taskID := flow.StepTaskID(wf, id, gen) + ":rewait:" + strconv.FormatInt(r.o.Now().UnixMilli()/rewaitEvery.Milliseconds(), 10)
	t, err := flow.NewTask(wf, id, gen, wspec, st, r.h.st.Retention())
	if err == nil {
		_, err = r.h.o.Client.EnqueueContext(sctx, t, asynq.TaskID(taskID))
	}
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil // enqueued already by an earlier pass: it has not run yet
	}
	if err != nil {
		return fmt.Errorf("enqueue %s: %w", taskID, err)
	}
	c.Requeued++
	r.h.o.Logger.Warn("reconciler enqueued a throttled step that had lost its place in its concurrency key's line", "wf", wf, "step", id, "key", key)
	r.h.o.Events(StepEvent{Workflow: wf, Step: id, Route: res.Route, State: store.StepQueued, Reconciled: ReconciledRequeued})
	return nil
}
