package flow

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// StepTask is one task a workflow may have in asynq: a step's, or a map
// instance's, by its id (with the workflow's generation). Settled marks a
// step's task whose step settled already: if it runs, it is running the
// steps it handed on (engine/handoff.go), which are stopped by their own
// tasks, and it is not canceled (asynq would count its done step failed).
type StepTask struct {
	Step, Queue, ID string
	Settled         bool
}

// TasksOf lists the tasks a workflow may have in asynq: one per step, and
// its instances' still in flight (a map's: the rest were never enqueued,
// or have nothing left to stop).
func TasksOf(ctx context.Context, rec *store.Store, id string, wspec *spec.Spec) []StepTask {
	out := make([]StepTask, 0, len(wspec.Steps))
	wf, err := rec.Get(ctx, id)
	if err != nil || len(wf.Steps) != len(wspec.Steps) {
		wf = &record.Workflow{} // gone: the steps' ids of generation 0 at least
	}
	ids := make([]string, len(wspec.Steps))
	for i := range wspec.Steps {
		ids[i] = wspec.Steps[i].ID
	}
	owners, _ := rec.Owners(ctx, id, ids) // none read: the steps' own tasks at least
	for i := range wspec.Steps {
		st := &wspec.Steps[i]
		queue := TaskQueue(id, spec.Resolve(wspec, st))
		own := StepTaskID(id, st.ID, wf.Generation)
		settled := i < len(wf.Steps) && wf.Steps[i].ID == st.ID && (wf.Steps[i].State == store.StepDone || wf.Steps[i].State == store.StepDead)
		out = append(out, StepTask{Step: st.ID, Queue: queue, ID: own, Settled: settled})
		if i < len(owners) && owners[i] != own && strings.HasPrefix(owners[i], own+":") {
			out = append(out, StepTask{Step: st.ID, Queue: queue, ID: owners[i], Settled: settled}) // a concurrency grant's task runs it
		}
		if i < len(wf.Steps) && wf.Steps[i].ID == st.ID {
			out = append(out, mapInstanceTasks(ctx, rec, id, st, &wf.Steps[i], wf.Generation, queue)...)
		}
	}
	return out
}

// StopTasks stops the tasks of a canceled or timed-out workflow (but
// skip, the calling task's own): every waiting one is deleted first, and
// only then are the running ones' contexts canceled. The other order
// would free a worker slot at each cancel and let the worker take the
// next waiting instance of a map before its delete (harmless, Begin
// refuses it, but a wide map's waiting tasks would each be dequeued and
// kept as completed instead of deleted). Gone already is fine.
func StopTasks(insp *asynq.Inspector, ts []StepTask, skip string) []error {
	var errs []error
	var running []StepTask
	for _, t := range ts {
		if t.ID == skip {
			continue
		}
		if active, err := deleteWaiting(insp, t.Queue, t.ID); err != nil {
			errs = append(errs, fmt.Errorf("step %s: %w", t.Step, err))
		} else if active && !t.Settled {
			running = append(running, t)
		}
	}
	for _, t := range running {
		if err := insp.CancelProcessing(t.ID); err != nil {
			errs = append(errs, fmt.Errorf("step %s: %w", t.Step, err))
		}
	}
	return errs
}

// deleteWaiting deletes the task if it waits (pending, scheduled or due
// for a retry) and reports whether it runs instead.
func deleteWaiting(insp *asynq.Inspector, queue, tid string) (active bool, err error) {
	// A waiting task can start between the look and the delete (asynq then
	// refuses the delete: it is active); look again.
	for range 3 {
		var info *asynq.TaskInfo
		info, err = insp.GetTaskInfo(queue, tid)
		if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		switch info.State {
		case asynq.TaskStateActive:
			return true, nil
		case asynq.TaskStatePending, asynq.TaskStateScheduled, asynq.TaskStateRetry:
			err = insp.DeleteTask(queue, tid)
			if err == nil || errors.Is(err, asynq.ErrTaskNotFound) {
				return false, nil // deleted, or it finished meanwhile; the canceled state stops it
			}
		default:
			return false, nil // completed or archived: nothing runs
		}
	}
	return false, err
}
