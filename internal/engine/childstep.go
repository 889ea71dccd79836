package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/defaults"
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
// first; a cancel of the parent cancels its children (producer.Cancel
// queues a tree cancel, treecancel.go). Every child is first reserved in
// its root's tree (store.ReserveChild): a tree holds at most
// limits.max_tree_workflows workflows, and one whose root ended none more.

// childRun runs a child workflow step's task, and its child's end.
type childRun struct{}

func (childRun) run(ctx context.Context, h *Handler, run *stepRun, a *store.Attempt, views map[string]spec.StepView) error {
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
func (h *Handler) startChild(ctx context.Context, run *stepRun, views map[string]spec.StepView) error {
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
	depth, root, err := h.childPlace(sctx, p.Workflow)
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
	// reserved in its tree first, by its id (a redelivery finds its
	// reservation), so that no crash lets the tree pass its bound
	if err := h.reserveChild(sctx, run, root, id); errors.Is(err, errTreeEnded) {
		return nil
	} else if err != nil {
		return err
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
	if err := h.createChild(sctx, run, id, &child, depth+1, root); err != nil {
		return err // retried: the child is created once
	}
	// linked once it exists: a child id the parent shows can be read and
	// canceled
	h.linkChild(sctx, run, id)
	if w, err := h.st.Summary(sctx, p.Workflow); err == nil && record.Terminal(w.State) {
		// the parent ended (a cancel) while its child was being created,
		// after the cancel looked for children: the child goes too
		_, _ = h.cancelWorkflow(sctx, id, "")
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
func (h *Handler) createChild(ctx context.Context, run *stepRun, id string, wspec *spec.Spec, depth int, root string) error {
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
		Parent: &store.ParentLink{Workflow: run.p.Workflow, Step: run.p.Step, Gen: run.p.Gen, Attempt: run.attempt, Queue: flow.TaskQueue(run.p.Workflow, run.r), Depth: depth, Root: root}}
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
func (h *Handler) resumeChild(ctx context.Context, run *stepRun, id string, cspec *spec.Spec) error {
	p := run.p
	state, err := h.st.Wait(ctx, p.Workflow, p.Step, fmt.Sprintf("waits for child workflow %s (%s)", id, run.st.Workflow.Spec))
	if err != nil {
		return fmt.Errorf("%w: %w", errNotRecorded, err)
	}
	if record.Terminal(state) {
		// the workflow ended (a cancel) after it created its child, and
		// before this task saw it: the child goes too
		_, _ = h.cancelWorkflow(ctx, id, "")
		return nil
	}
	h.linkChild(ctx, run, id)
	return enqueueRoots(ctx, h, id, cspec)
}

// linkChild names child id on run's step, for the pages and the CLI. The
// link is not what finds a child (its id derives from the step's run and
// attempt; its tree holds it), so a link that cannot be written is
// logged, not retried: a retry of a step whose child exists could end in
// a second child, should the first end meanwhile.
func (h *Handler) linkChild(ctx context.Context, run *stepRun, id string) {
	if err := untilStored(ctx, func() error {
		return h.st.SetChild(ctx, run.p.Workflow, run.p.Step, id, run.p.Gen, run.attempt)
	}); err != nil {
		run.log.Warn("child workflow not linked to its step (the pages will not name it)", "child", id, "err", store.Excerpt(err.Error()))
	}
}

func enqueueRoots(ctx context.Context, h *Handler, id string, wspec *spec.Spec) error {
	for _, root := range wspec.Roots() {
		if err := flow.EnqueueStep(ctx, h.o.Client, id, wspec, root, 0, h.st.Retention()); err != nil {
			return err
		}
	}
	return nil
}

// childPlace is how deep workflow wf is among child workflows (0: not a
// child) and the root of its tree (wf itself when it is not a child).
func (h *Handler) childPlace(ctx context.Context, wf string) (int, string, error) {
	l, err := h.st.ParentOf(ctx, wf)
	if err != nil || l == nil {
		return 0, wf, err
	}
	if l.Root != "" {
		return l.Depth, l.Root, nil
	}
	root, err := h.st.RootOf(ctx, wf, flow.MaxChildDepth) // a child of an earlier version
	return l.Depth, root, err
}

// reserveChild reserves child id in the tree of root
// (limits.max_tree_workflows; store.ReserveChild). A tree full
// dead-letters the step (class limit; a requeue after the bound is raised
// starts the child); a tree whose root ended starts nothing more: the
// workflow that would have started the child is canceled with it.
func (h *Handler) reserveChild(ctx context.Context, run *stepRun, root, id string) error {
	bound := cmp.Or(h.o.MaxTreeWorkflows, defaults.MaxTreeWorkflows)
	_, err := h.st.ReserveChild(ctx, root, run.p.Workflow, id, bound)
	var full *store.TreeFullError
	switch {
	case errors.As(err, &full):
		return h.deadLetter(ctx, run, retry.Limit, fmt.Errorf("workflow.spec: child workflow %s of %s not started: its tree (root %s) has %d workflows, the most limits.max_tree_workflows (%d) allows",
			id, run.st.Workflow.Spec, root, full.Workflows, bound))
	case errors.Is(err, store.ErrTreeEnded):
		run.log.Info("child workflow not started: its tree's root ended", "child", id, "root", root)
		if _, err := h.cancelWorkflow(ctx, run.p.Workflow, deliveryOf(ctx).taskID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return errTreeEnded
	}
	return err
}

// errTreeEnded ends startChild without a child: its tree's root ended.
var errTreeEnded = errors.New("tree ended")

func ids(wspec *spec.Spec) []string {
	out := make([]string, len(wspec.Steps))
	for i := range wspec.Steps {
		out[i] = wspec.Steps[i].ID
	}
	return out
}

// childEnded settles a child workflow step whose child ended: done with
// the child's output, or dead with its reason (only if it still waits).
func (h *Handler) childEnded(ctx context.Context, run *stepRun) error {
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
	usage, costMicros, spend := childSpend(child)
	err = h.settle(ctx, run, store.Outcome{Done: true, Decided: true, Output: out, Target: "child", Attempt: run.attempt,
		Usage: usage, CostMicros: costMicros, Spend: spend}, retry.OK)
	if errors.Is(err, store.ErrAlreadySettled) {
		return nil
	}
	return err
}

// childSpend is what a completed child workflow used and spent, its own
// children's included (each rolled up into its child step when it
// ended): its steps' tokens, their cost in micros, and its spend by the
// provider that answered. Its child workflow step carries them, so the
// parent's usage and cost (and its cost by provider) include the child's.
func childSpend(child *store.Workflow) (store.Usage, int64, map[string]int64) {
	var u store.Usage
	var micros int64
	for _, s := range child.Steps {
		u.PromptTokens += s.Usage.PromptTokens
		u.CompletionTokens += s.Usage.CompletionTokens
		micros += int64(math.Round(s.CostUSD * 1e6))
	}
	var spend map[string]int64
	for p, c := range flow.CostByProvider(child) {
		if m := int64(math.Round(c * 1e6)); m > 0 {
			if spend == nil {
				spend = map[string]int64{}
			}
			spend[p] += m
		}
	}
	return u, micros, spend
}

// childFailed dead-letters a child workflow step (if it still waits) with
// reason: class handler, as for a code step whose function failed.
func (h *Handler) childFailed(ctx context.Context, run *stepRun, reason string) error {
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
