package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/tasks"
)

// An approval step (approve: { message, timeout }) asks a person: when
// its inputs have settled, the workflow is "waiting" until someone
// approves or rejects it with a comment (enqueue approve ID STEP, the
// dashboard, the API). The decision is the step's output, as JSON that
// dependents read (.Steps.<id>.JSON.approved, .comment); no decision
// within the timeout is a rejection.

// ApproveSpec makes a step an approval step.
type ApproveSpec struct {
	// Message is what the person is asked: a template over .Input and
	// .Steps, like a prompt.
	Message string `yaml:"message" json:"message"`
	// Timeout turns a missing decision into a rejection (0:
	// DefaultApprovalTimeout).
	Timeout Duration `yaml:"timeout" json:"timeout,omitempty"`
}

// DefaultApprovalTimeout is how long an approval step waits by default.
const DefaultApprovalTimeout = 24 * time.Hour

// Decision is an approval step's output.
type Decision struct {
	Approved bool      `json:"approved"`
	Comment  string    `json:"comment"`
	By       string    `json:"by"` // who decided: "cli", "dashboard", "api", or "timeout"
	At       time.Time `json:"at"`
}

// ErrNotWaiting is returned for a decision on a step that is not waiting
// for one (decided already, never reached, or its workflow ended).
var ErrNotWaiting = errors.New("the step is not waiting for a decision")

func (a *ApproveSpec) timeout() time.Duration {
	if a.Timeout > 0 {
		return time.Duration(a.Timeout)
	}
	return DefaultApprovalTimeout
}

// checkApprove checks an approval step: a message, and nothing that would
// make it another kind of step.
func checkApprove(st *Step, where string, bad func(int, string, string, ...any)) {
	if strings.TrimSpace(st.Approve.Message) == "" {
		bad(st.line, where+".approve.message", "is empty (say what the person decides)")
	}
	if t := time.Duration(st.Approve.Timeout); t != 0 && t < time.Second {
		bad(st.line, where+".approve.timeout", "%s is under 1s", t)
	}
	if st.ForEach != "" {
		bad(lineOr(st.fieldLines["for_each"], st.line), where+".for_each", "is not for an approval step (approve:): a person decides one step")
	}
}

// park runs an approval step's task: the step waits for a person, and a
// task due at its timeout rejects it if no one decided.
func (h *Handler) park(ctx context.Context, run stepRun, views map[string]StepView) error {
	p, spec, st := run.p, run.spec, run.st
	msg, err := renderData(ctx, st.messageT, dataOf(spec.Input, views, nil))
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
	due := time.Now().Add(st.Approve.timeout())
	if due.Truncate(time.Second) != due {
		due = due.Truncate(time.Second).Add(time.Second)
	}
	t := asynq.NewTask(tasks.TypeApprovalTimeout, payload, asynq.TaskID(StepTaskID(p.Workflow, p.Step, p.Gen)+":timeout"), asynq.Queue(run.r.Queue),
		asynq.ProcessAt(due), asynq.MaxRetry(DefaultMaxRetries), asynq.Retention(h.st.Retention()))
	if _, err := h.o.Client.EnqueueContext(sctx, t); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("schedule the approval timeout: %w", err)
	}
	run.log.Info("approval step waits for a decision", "timeout", st.Approve.timeout())
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
	spec, err := h.specs.get(ctx, h.st, p.Workflow)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	st, ok := spec.Step(p.Step)
	if !ok || st.Approve == nil {
		return fmt.Errorf("workflow %s has no approval step %q: %w", logID(p.Workflow), logID(p.Step), asynq.SkipRetry)
	}
	d := Decision{Comment: fmt.Sprintf("no decision within %s: rejected", st.Approve.timeout()), By: "timeout", At: time.Now().UTC()}
	_, err = decide(ctx, h.st, h.o.Client, p.Workflow, spec, p.Step, p.Gen, d)
	if errors.Is(err, ErrNotWaiting) {
		return nil // decided in time
	}
	return err
}

// decide records a decision on a waiting approval step of run gen (-1: the
// current run, a person's decision) and enqueues the dependents it made
// ready; ErrNotWaiting if the step was not waiting, or is waiting in
// another run (an earlier run's timeout does not decide a rerun's step).
func decide(ctx context.Context, st *store.Store, c *asynq.Client, wf string, spec *Spec, step string, gen int, d Decision) (string, error) {
	out, _ := json.Marshal(d)
	res, err := st.Settle(ctx, wf, step, store.Outcome{Done: true, Decided: true, Output: string(out), Target: "approval", Gen: gen},
		dependentsOf(spec, step))
	if errors.Is(err, store.ErrOtherRun) {
		return "", fmt.Errorf("workflow %s step %s: %w: %w", wf, step, ErrNotWaiting, err)
	}
	if errors.Is(err, store.ErrAlreadySettled) {
		return res.State, fmt.Errorf("workflow %s step %s: %w", wf, step, ErrNotWaiting)
	}
	if err != nil {
		return "", err
	}
	for _, dep := range res.Ready {
		if err := enqueueStep(ctx, c, wf, spec, dep, res.Gen, st.Retention()); err != nil {
			return res.State, err
		}
	}
	if res.State == StateCompleted || res.State == StateBlocked {
		if err := enqueueDecided(ctx, c, wf, spec, step, res.Gen, st.Retention()); err != nil {
			return res.State, err
		}
	}
	return res.State, nil
}

// enqueueDecided hands the end a decision brought to a worker
// (tasks.TypeDecided), on the approval step's queue; once per step and run.
func enqueueDecided(ctx context.Context, c *asynq.Client, wf string, spec *Spec, step string, gen int, retention time.Duration) error {
	s, _ := spec.Step(step)
	payload, _ := json.Marshal(tasks.Payload{Workflow: wf, Step: step, Gen: gen})
	t := asynq.NewTask(tasks.TypeDecided, payload, asynq.TaskID(StepTaskID(wf, step, gen)+":decided"), asynq.Queue(spec.resolve(s).Queue),
		asynq.MaxRetry(DefaultMaxRetries), asynq.Retention(retention))
	if _, err := c.EnqueueContext(ctx, t); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("workflow %s step %s decided, but its end could not be handed to a worker (no webhook or count): %w", wf, step, err)
	}
	return nil
}

// decided runs a tasks.TypeDecided task: the decided step's event (metrics
// count it and, with its workflow state, the workflow's end) and the
// end's webhook. The webhook is sent only if the workflow is still in
// that state (notifyEnd reads it again).
func (h *Handler) decided(ctx context.Context, t *asynq.Task) error {
	p, err := tasks.DecodePayload(t.Payload())
	if err != nil {
		return fmt.Errorf("%v: %w", err, asynq.SkipRetry)
	}
	spec, err := h.specs.get(ctx, h.st, p.Workflow)
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
	if w.Generation != p.Gen || (w.State != StateCompleted && w.State != StateBlocked) {
		return nil // rerun since, or no longer ended that way
	}
	st, _ := spec.Step(p.Step)
	route := ""
	if st != nil {
		route = spec.resolve(st).Route
	}
	h.o.Events(StepEvent{Workflow: p.Workflow, Step: p.Step, Route: route, State: store.StepDone, WorkflowState: w.State, Target: "approval"})
	h.notifyEnded(ctx, p.Workflow, spec, w.State)
	return nil
}

// Decide approves (or rejects) approval step step of workflow id, with a
// comment; by says who (cli, dashboard, api). It returns the workflow's
// state after the decision; ErrNotWaiting if the step is not waiting.
func (c *Client) Decide(ctx context.Context, id, step string, approve bool, comment, by string) (string, error) {
	spec, err := c.spec(ctx, id)
	if err != nil {
		return "", err
	}
	if st, ok := spec.Step(step); !ok || st.Approve == nil {
		return "", fmt.Errorf("workflow %s has no approval step %q: %w", id, step, ErrNotWaiting)
	}
	return decide(ctx, c.store, c.asynq, id, spec, step, -1, Decision{Approved: approve, Comment: comment, By: by, At: c.now().UTC()})
}

// approvalKind is a step a person decides (approve:): it parks, waiting,
// until an approval, a rejection or its timeout.
type approvalKind struct{ oneTask }

func (approvalKind) claims(st *Step) bool { return st.Approve != nil }

func (approvalKind) takes(*Step) ([]string, string) {
	return []string{"approve", "route"}, "an approval step (approve:)"
}

func (approvalKind) check(_ *Spec, st *Step, where string, _ Limits, bad problemFunc) {
	checkApprove(st, where, bad)
}

func (approvalKind) prepare(st *Step) (err error) {
	st.messageT, err = parseTemplate(st.ID+".approve.message", st.Approve.Message)
	return err
}

func (approvalKind) need(*Step, resolved) (string, string) { return "", "" } // a person, not a worker

func (approvalKind) jsonOutput(*Step) bool { return true } // the decision

func (approvalKind) run(ctx context.Context, h *Handler, run stepRun, a *store.Attempt, views map[string]StepView) error {
	if a.Step.State == store.StepWaiting || a.Step.State == store.StepDone {
		return nil // parked already (a redelivery), or decided
	}
	return h.park(ctx, run, views)
}

func (approvalKind) input(ctx context.Context, st *Step, data promptData) (system, prompt string) {
	msg, err := renderData(ctx, st.messageT, data)
	if err != nil {
		return "", "(cannot render: " + err.Error() + ")"
	}
	return "", msg
}
