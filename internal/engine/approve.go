package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/tasks"
)

// An approval step (approve: { message, timeout }) asks a person: when
// its inputs have settled, the workflow is "waiting" until someone
// approves or rejects it with a comment (enqueue approve ID STEP, the
// dashboard, the API). The decision is the step's output, as JSON that
// dependents read (.Steps.<id>.JSON.approved, .comment); no decision
// within the timeout is a rejection.

// park runs an approval step's task: the step waits for a person, and a
// task due at its timeout rejects it if no one decided.
func (h *Handler) park(ctx context.Context, run *stepRun, views map[string]spec.StepView) error {
	p, wspec, st := run.p, run.spec, run.st
	msg, err := spec.RenderData(ctx, spec.MessageTemplate(st), spec.DataOf(wspec.Input, views, nil))
	if err != nil {
		return h.deadLetter(ctx, run, "bad_request", fmt.Errorf("approve.message: %w", err))
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	var state string
	if err := untilStored(sctx, func() (err error) {
		state, err = h.st.Wait(sctx, p.Workflow, p.Step, msg)
		return err
	}); err != nil {
		return fmt.Errorf("%w: %w", errNotRecorded, err)
	}
	payload, _ := json.Marshal(p)
	// asynq keeps a task's due time in whole seconds, rounded down: the
	// timeout is due at the next whole second after it, never before
	due := time.Now().Add(spec.ApprovalTimeout(st.Approve))
	if due.Truncate(time.Second) != due {
		due = due.Truncate(time.Second).Add(time.Second)
	}
	t := asynq.NewTask(tasks.TypeApprovalTimeout, payload, asynq.TaskID(flow.StepTaskID(p.Workflow, p.Step, p.Gen)+":timeout"), asynq.Queue(flow.TaskQueue(p.Workflow, run.r)),
		asynq.ProcessAt(due), asynq.MaxRetry(spec.DefaultMaxRetries), asynq.Retention(h.st.Retention()))
	if _, err := h.o.Client.EnqueueContext(sctx, t); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("schedule the approval timeout: %w", err)
	}
	run.log.Info("approval step waits for a decision", "timeout", spec.ApprovalTimeout(st.Approve))
	h.o.Events(StepEvent{Workflow: p.Workflow, Step: p.Step, State: store.StepWaiting, WorkflowState: state, Attempt: run.attempt})
	return nil
}

// approvalTimeout runs a tasks.TypeApprovalTimeout task: the step is rejected
// unless someone decided.
func (h *Handler) approvalTimeout(ctx context.Context, t *asynq.Task) error {
	p, err := tasks.DecodePayload(t.Payload())
	if err != nil {
		return fmt.Errorf("%v: %w", err, asynq.SkipRetry)
	}
	wspec, err := h.specs.get(ctx, h.st, p.Workflow)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	st, ok := wspec.Step(p.Step)
	if !ok || st.Approve == nil {
		return fmt.Errorf("workflow %s has no approval step %q: %w", flow.BoundID(p.Workflow), flow.BoundID(p.Step), asynq.SkipRetry)
	}
	d := spec.Decision{Comment: fmt.Sprintf("no decision within %s: rejected", spec.ApprovalTimeout(st.Approve)), By: "timeout", At: time.Now().UTC()}
	_, err = flow.Decide(ctx, h.st, h.o.Client, p.Workflow, wspec, p.Step, p.Gen, d)
	if errors.Is(err, flow.ErrNotWaiting) {
		return nil // decided in time
	}
	return err
}

// decided runs a tasks.TypeDecided task: the decided step's event (metrics
// count it and, with its workflow state, the workflow's end) and the
// end's webhook. The webhook is sent only if the workflow is still in
// that state (NotifyEnd reads it again).
func (h *Handler) decided(ctx context.Context, t *asynq.Task) error {
	p, err := tasks.DecodePayload(t.Payload())
	if err != nil {
		return fmt.Errorf("%v: %w", err, asynq.SkipRetry)
	}
	wspec, err := h.specs.get(ctx, h.st, p.Workflow)
	if errors.Is(err, store.ErrNotFound) {
		return nil // expired: nothing to tell
	}
	if err != nil {
		return err
	}
	w, err := h.st.Summary(ctx, p.Workflow)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if w.Generation != p.Gen || (w.State != record.StateCompleted && w.State != record.StateBlocked) {
		return nil // rerun since, or no longer ended that way
	}
	st, ok := wspec.Step(p.Step)
	if !ok {
		return nil
	}
	route := spec.Resolve(wspec, st).Route
	h.o.Events(StepEvent{Workflow: p.Workflow, Step: p.Step, Route: route, State: store.StepDone, WorkflowState: w.State, Target: spec.WaitsFor(st)})
	h.notifyEnded(ctx, p.Workflow, wspec, w.State)
	return nil
}

// approvalRun parks an approval step until its decision.
type approvalRun struct{}

func (approvalRun) run(ctx context.Context, h *Handler, run *stepRun, a *store.Attempt, views map[string]spec.StepView) error {
	if a.Step.State == store.StepWaiting || a.Step.State == store.StepDone {
		return nil // parked already (a redelivery), or decided
	}
	return h.park(ctx, run, views)
}
