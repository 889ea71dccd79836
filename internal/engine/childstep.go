package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/retry"
)

// A child workflow step (workflow: { spec, input }) runs a stored spec as
// a workflow of its own: its task parks the step ("waiting": the step
// holds no worker slot), then creates the child (an id fixed by the step,
// its run and its attempt, so a retried or redelivered task finds the
// child it started and never starts a second), linked both ways. The
// child's end tells the step (flow.TellParent: a tasks.TypeChildEnded
// task with the step's payload): completed, the child's output is the
// step's; failed, canceled or timed out, the step is dead-lettered with
// the child's reason. The child's deadline is its parent's, if that comes
// first; a cancel of the parent cancels its children (producer.Cancel).

// childRun runs a child workflow step's task, and its child's end.
type childRun struct{}

func (childRun) run(ctx context.Context, h *Handler, run stepRun, a *store.Attempt, views map[string]spec.StepView) error {
	switch {
	case a.Step.State == store.StepDone:
		return nil
	case a.Step.State == store.StepWaiting && run.childEnded:
		return h.childEnded(ctx, run)
	}
	// the first run, a redelivery of a step parked already (creating the
	// child again changes nothing), or a requeued dead letter (a new child)
	return h.startChild(ctx, run, views)
}

// startChild parks the step and creates its child workflow.
func (h *Handler) startChild(ctx context.Context, run stepRun, views map[string]spec.StepView) error {
	p, st := run.p, run.st
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	id := flow.ChildID(p.Workflow, p.Step, p.Gen, run.attempt)
	if cspec, err := h.specs.get(sctx, h.st, id); err == nil {
		// started already (a retry, a redelivery): the child keeps the
		// version it started with; its roots again change nothing
		return h.resumeChild(sctx, run, id, cspec)
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	depth, err := h.childDepth(sctx, p.Workflow)
	if err != nil {
		return err
	}
	if depth >= flow.MaxChildDepth {
		return h.deadLetter(ctx, run, retry.BadRequest, fmt.Errorf("workflow.spec: %s would be a child %d levels deep, over %d (does a spec start itself?)", st.Workflow.Spec, depth+1, flow.MaxChildDepth))
	}
	raw, version, err := h.st.GetSpec(sctx, st.Workflow.Spec, 0)
	if errors.Is(err, store.ErrNoSpec) {
		return h.deadLetter(ctx, run, retry.BadRequest, fmt.Errorf("workflow.spec: no stored spec %q (enqueue spec put, or a worker's RegisterSpec)", st.Workflow.Spec))
	}
	if err != nil {
		return err
	}
	var child spec.Spec
	if err := json.Unmarshal(raw, &child); err != nil {
		return h.deadLetter(ctx, run, retry.BadRequest, fmt.Errorf("workflow.spec: stored spec %s version %d is unreadable: %w", st.Workflow.Spec, version, err))
	}
	in, err := spec.ChildInput(ctx, st, spec.DataOf(run.spec.Input, views, run.inst))
	if err != nil {
		return h.deadLetter(ctx, run, retry.BadRequest, err)
	}
	input := maps.Clone(child.Input)
	if input == nil {
		input = map[string]any{}
	}
	maps.Copy(input, in)
	child.Input = input
	child.Shards = run.spec.Shards // the family stays on the shards its first workflow began on
	if err := spec.CheckKeys(ctx, &child); err != nil {
		return h.deadLetter(ctx, run, retry.BadRequest, fmt.Errorf("child workflow %s: %w", st.Workflow.Spec, err))
	}
	// parked first: the child's end finds the step waiting, however soon
	// it comes
	var state string
	if err := untilStored(sctx, func() (err error) {
		state, err = h.st.Wait(sctx, p.Workflow, p.Step, fmt.Sprintf("waits for child workflow %s (%s version %d)", id, st.Workflow.Spec, version))
		return err
	}); err != nil {
		return fmt.Errorf("%w: %w", errNotRecorded, err)
	}
	if record.Terminal(state) {
		return nil // the workflow ended meanwhile: no child
	}
	if err := h.st.SetChild(sctx, p.Workflow, p.Step, id); err != nil {
		return err // retried: parking and linking again change nothing
	}
	if err := h.createChild(sctx, run, id, &child, depth+1); err != nil {
		return err // retried: the child is created once
	}
	if w, err := h.st.Summary(sctx, p.Workflow); err == nil && record.Terminal(w.State) {
		// the parent ended (a cancel) while its child was being created,
		// after the cancel looked for children: the child goes too
		_, _ = h.st.Cancel(sctx, id, ids(&child))
	}
	if h.o.AfterChild != nil {
		h.o.AfterChild(p.Workflow, p.Step, id)
	}
	run.log.Info("child workflow started", "child", id, "spec", st.Workflow.Spec, "version", version)
	h.o.Events(StepEvent{Workflow: p.Workflow, Step: p.Step, State: store.StepWaiting, WorkflowState: state, Attempt: run.attempt})
	return nil
}

// createChild writes child workflow id of wspec, linked to run's step,
// with its parent's deadline if that comes first, and enqueues its roots;
// a child that exists already is left as it is (its roots enqueued again
// change nothing: their task ids).
func (h *Handler) createChild(ctx context.Context, run stepRun, id string, wspec *spec.Spec, depth int) error {
	data, err := json.Marshal(wspec)
	if err != nil {
		return err
	}
	deadline := time.Time{}
	if d := time.Duration(wspec.Deadline); d > 0 {
		deadline = time.Now().Add(d)
	}
	if run.deadline != nil && (deadline.IsZero() || run.deadline.Before(deadline)) {
		deadline = *run.deadline
	}
	w := store.NewWorkflow{ID: id, Name: wspec.Name, Spec: data, Steps: ids(wspec), DeadlineAt: deadline, Ready: wspec.Roots(),
		Parent: &store.ParentLink{Workflow: run.p.Workflow, Step: run.p.Step, Gen: run.p.Gen, Attempt: run.attempt, Queue: flow.TaskQueue(run.p.Workflow, run.r), Depth: depth}}
	if h.st.EnqueuesTasks() && deadline.IsZero() {
		for _, root := range wspec.Roots() {
			st, _ := wspec.Step(root)
			w.Roots = append(w.Roots, flow.QueuedTask(id, root, 0, wspec, st, h.st.Retention()))
		}
	}
	enqueued, err := h.st.Create(ctx, w)
	if err != nil && !errors.Is(err, store.ErrExists) {
		return err
	}
	if enqueued {
		return nil
	}
	if err := flow.ScheduleDeadline(ctx, h.o.Client, id, wspec, deadline, h.st.Retention()); err != nil {
		return err
	}
	return enqueueRoots(ctx, h, id, wspec)
}

// resumeChild finishes starting child id, created already with cspec: the
// step parked and linked, the child's roots enqueued (again: their task
// ids keep them from running twice).
func (h *Handler) resumeChild(ctx context.Context, run stepRun, id string, cspec *spec.Spec) error {
	p := run.p
	state, err := h.st.Wait(ctx, p.Workflow, p.Step, fmt.Sprintf("waits for child workflow %s (%s)", id, run.st.Workflow.Spec))
	if err != nil {
		return fmt.Errorf("%w: %w", errNotRecorded, err)
	}
	if record.Terminal(state) {
		return nil
	}
	if err := h.st.SetChild(ctx, p.Workflow, p.Step, id); err != nil {
		return err
	}
	return enqueueRoots(ctx, h, id, cspec)
}

func enqueueRoots(ctx context.Context, h *Handler, id string, wspec *spec.Spec) error {
	for _, root := range wspec.Roots() {
		if err := flow.EnqueueStep(ctx, h.o.Client, id, wspec, root, 0, h.st.Retention()); err != nil {
			return err
		}
	}
	return nil
}

// childDepth is how deep workflow wf is among child workflows (0: not a
// child).
func (h *Handler) childDepth(ctx context.Context, wf string) (int, error) {
	l, err := h.st.ParentOf(ctx, wf)
	if err != nil || l == nil {
		return 0, err
	}
	return l.Depth, nil
}

func ids(wspec *spec.Spec) []string {
	out := make([]string, len(wspec.Steps))
	for i := range wspec.Steps {
		out[i] = wspec.Steps[i].ID
	}
	return out
}

// childEnded settles a child workflow step whose child ended: done with
// the child's output, or dead with its reason (only if it still waits).
func (h *Handler) childEnded(ctx context.Context, run stepRun) error {
	p := run.p
	id := flow.ChildID(p.Workflow, p.Step, p.Gen, run.attempt)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	child, err := h.st.Get(sctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return h.childFailed(ctx, run, fmt.Sprintf("child workflow %s is gone (expired)", id))
	}
	if err != nil {
		return err
	}
	switch child.State {
	case store.StateCompleted:
	case store.StateFailed, store.StateCanceled, store.StateTimedOut:
		reason := fmt.Sprintf("child workflow %s ended %s", id, child.State)
		if child.Error != "" {
			reason += ": " + child.Error
		}
		return h.childFailed(ctx, run, reason)
	default:
		return nil // not ended (a blocked child may be requeued): told again when it ends
	}
	cspec, err := h.specs.get(sctx, h.st, id)
	if err != nil {
		return err
	}
	maps, err := h.childMapOutputs(sctx, id, cspec, child)
	if errors.Is(err, errMapViewTooLarge) {
		return h.childFailed(ctx, run, fmt.Sprintf("%s: child workflow %s's output is over limits.max_output_bytes (%d)", retry.OutputTooLarge, id, h.o.MaxOutputBytes))
	}
	if err != nil {
		return err
	}
	out := flow.ChildOutput(cspec, child, maps)
	if len(out) > h.o.MaxOutputBytes {
		return h.childFailed(ctx, run, fmt.Sprintf("%s: child workflow %s's output is %d bytes, over limits.max_output_bytes (%d)", retry.OutputTooLarge, id, len(out), h.o.MaxOutputBytes))
	}
	err = h.settle(ctx, run, store.Outcome{Done: true, Decided: true, Output: out, Target: "child", Attempt: run.attempt}, retry.OK)
	if errors.Is(err, store.ErrAlreadySettled) {
		return nil
	}
	return err
}

// childFailed dead-letters a child workflow step (if it still waits) with
// reason: class handler, as for a code step whose function failed.
func (h *Handler) childFailed(ctx context.Context, run stepRun, reason string) error {
	o := store.Outcome{Done: false, OnlyIfOpen: true, Optional: run.st.Optional, Error: store.Excerpt(reason), Class: string(retry.Handler), Attempt: run.attempt}
	if err := h.settle(ctx, run, o, retry.Handler); errors.Is(err, store.ErrAlreadySettled) {
		return nil
	} else if err != nil {
		return err
	}
	run.log.Error("child workflow step dead-lettered", "err", reason)
	return fmt.Errorf("%s: %s: %w", retry.Handler, store.Excerpt(reason), asynq.SkipRetry)
}

// childMapOutputs reads the instances' outputs of child id's final map
// steps (a record with map counters), each as a JSON list, a page at a
// time, up to limits.max_output_bytes (errMapViewTooLarge past it).
func (h *Handler) childMapOutputs(ctx context.Context, id string, cspec *spec.Spec, child *store.Workflow) (map[string]json.RawMessage, error) {
	finals := map[string]bool{}
	for _, f := range cspec.Finals() {
		finals[f] = true
	}
	var out map[string]json.RawMessage
	size := 0
	for _, s := range child.Steps {
		if !finals[s.ID] || s.Map == nil {
			continue
		}
		var list []json.RawMessage
		for from := 0; from < s.Map.Items; from += flow.OutputsPage {
			page, err := h.st.InstanceOutputs(ctx, id, s.ID, from, min(flow.OutputsPage, s.Map.Items-from))
			if err != nil {
				return nil, err
			}
			for _, r := range page {
				v := flow.OutputValue(cspec, s.ID, r.Output, r.State == store.StepDone)
				if size += len(v) + 1; size > h.o.MaxOutputBytes {
					return nil, errMapViewTooLarge
				}
				list = append(list, v)
			}
		}
		b, _ := json.Marshal(list)
		if out == nil {
			out = map[string]json.RawMessage{}
		}
		out[s.ID] = b
	}
	return out, nil
}
