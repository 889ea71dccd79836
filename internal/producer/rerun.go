package producer

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// ErrNotFinished is returned by Rerun for a workflow still running.
var ErrNotFinished = store.ErrNotFinished

// Rerun runs a workflow that ended (completed, failed, timed out, canceled)
// or is blocked again from step from: the outputs of the steps before it
// are kept; from and every step downstream of it (and every step a cancel
// or deadline stopped, with what is downstream of those: nothing else
// would ever run them) lose their records,
// checkpoints, map instances and durable sub-calls, and run again in the
// workflow's next generation, whose task ids ("<wf>:<step>@<gen>") never
// collide with those asynq keeps of earlier runs, and whose tasks are the
// only ones that act (a leftover task of an earlier run does nothing). A
// rerun has no deadline. It returns the new generation.
func (c *Client) Rerun(ctx context.Context, id, from string) (int, error) {
	wspec, err := c.spec(ctx, id)
	if err != nil {
		return 0, err
	}
	if _, ok := wspec.Step(from); !ok {
		return 0, fmt.Errorf("workflow %s has no step %q: %w", id, from, spec.ErrInvalidSpec)
	}
	wf, err := c.store.Get(ctx, id)
	if err != nil {
		return 0, err
	}
	roots := []string{from}
	for _, s := range wf.Steps {
		if s.State == store.StepCanceled {
			roots = append(roots, s.ID)
		}
	}
	again := downstream(wspec, roots...)
	inputs := make(map[string][]string, len(again))
	items := map[string]int{}
	for _, sid := range again {
		st, _ := wspec.Step(sid)
		inputs[sid] = st.DependsOn
		if n, ok := flow.MapItems(ctx, c.store, id, st); ok {
			items[sid] = n
		}
	}
	// the dead letters of the steps that run again belong to the run that
	// ends here: once it has, they go (a requeue of one would act for a
	// generation that is over, and the verbs by workflow and step aim at
	// the new run's)
	rerun := map[string]bool{}
	for _, sid := range again {
		rerun[sid] = true
	}
	var letters []flow.StepTask
	for _, t := range flow.TasksOf(ctx, c.store, id, wspec) {
		if st, _, ok := spec.StepOf(wspec, t.Step); ok && rerun[st.ID] { // a map's instances go with their map
			letters = append(letters, t)
		}
	}
	gen, ready, err := c.store.Rerun(ctx, id, again, inputs, items)
	// not confirmed: rerun on the primary all the same; its steps are
	// enqueued as for any rerun, and the caller is told at the end
	err, unconfirmed := store.Unconfirmed(err)
	if err != nil {
		return 0, err
	}
	for _, t := range letters {
		deleteArchived(ctx, c.insp, t.Queue, t.ID) // one left behind is listed, and acts for nothing: Begin refuses an old run's task
	}
	if err := c.store.Watch(ctx, id); err != nil {
		return gen, err
	}
	ts, err := flow.StepTasks(id, wspec, ready, gen, c.o.Retention)
	if err != nil {
		return gen, err
	}
	// with durability on, confirmed as the rerun was; not confirmed:
	// enqueued all the same, and told at the end
	err, notYet := store.Unconfirmed(flow.Enqueue(ctx, c.store, c.asynq, ts...))
	if err != nil {
		return gen, err
	}
	return gen, cmp.Or(unconfirmed, notYet)
}

// downstream is the steps from and every step that depends on one of them,
// directly or not, in spec order.
func downstream(wspec *spec.Spec, from ...string) []string {
	in := map[string]bool{}
	for _, f := range from {
		in[f] = true
	}
	var walk func(string)
	walk = func(id string) {
		for _, d := range wspec.Dependents(id) {
			if !in[d] {
				in[d] = true
				walk(d)
			}
		}
	}
	for _, f := range from {
		walk(f)
	}
	var out []string
	for _, st := range wspec.Steps {
		if in[st.ID] {
			out = append(out, st.ID)
		}
	}
	return out
}

// deleteArchived deletes the task if it is a dead letter (archived). A
// task still active is one whose handler has settled the step dead and is
// returning: asynq archives it a moment later, which is waited for
// (within archiveWait).
func deleteArchived(ctx context.Context, insp *asynq.Inspector, queue, tid string) {
	wait := time.NewTimer(archiveWait)
	defer wait.Stop()
	for {
		info, err := insp.GetTaskInfo(queue, tid)
		switch {
		case err != nil:
			return
		case info.State == asynq.TaskStateArchived:
			_ = insp.DeleteTask(queue, tid)
			return
		case info.State != asynq.TaskStateActive:
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-wait.C:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// archiveWait bounds how long a rerun waits for asynq to archive a dead
// letter whose handler is returning.
const archiveWait = 5 * time.Second
