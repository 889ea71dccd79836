package agentq

import (
	"context"
	"time"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/record"
)

// The controls a person or a program applies to workflows: the enqueue
// command's verbs (approve, reject, rerun, list, dlq) on the Go client.

// Errors a control returns, to branch on with errors.Is.
var (
	// ErrUnknownClass is returned for a failure class that is not one
	// (docs/failures.md lists them).
	ErrUnknownClass = producer.ErrUnknownClass
	// ErrUnknownState is returned by List for a state that is not a
	// workflow state (the State* constants).
	ErrUnknownState = producer.ErrUnknownState
	// ErrNotWaiting: the step is not waiting for a decision (decided
	// or signaled already, not reached yet, or its workflow ended).
	ErrNotWaiting = flow.ErrNotWaiting
	// ErrNotFinished: a rerun of a workflow still running, or blocked
	// while steps of it are still in flight (the error names them).
	ErrNotFinished = producer.ErrNotFinished
	// ErrNoDeadLetter: no dead letter has that task id.
	ErrNoDeadLetter = producer.ErrNoDeadLetter
	// ErrUnavailable: Redis did not answer a read; the workflow goes on.
	// Wait returns it at once: call Wait again to wait through an outage.
	ErrUnavailable = flow.ErrUnavailable
)

// WithDeadline bounds the submitted workflow to d from now (at least 1s),
// over its spec's deadline: past it the workflow ends timed_out.
func WithDeadline(d time.Duration) SubmitOption { return producer.WithDeadline(d) }

// Approve decides approval step step of workflow id: approved, with a
// comment (kept in the decision, by "api"). ErrNotWaiting if the step is
// not waiting for a decision.
func (c *Client) Approve(ctx context.Context, id, step, comment string) error {
	_, err := c.Decide(ctx, id, step, Decision{Approve: true, Comment: comment})
	return err
}

// Reject decides approval step step of workflow id: rejected. The
// workflow goes on; its dependents read the decision.
func (c *Client) Reject(ctx context.Context, id, step, comment string) error {
	_, err := c.Decide(ctx, id, step, Decision{Comment: comment})
	return err
}

// Decision is a decision on an approval step (Decide): Approve (false:
// rejected), a Comment kept with it, and By, who decided ("": "api"; a
// server records its own).
type Decision struct {
	Approve bool
	Comment string
	By      string
}

// Decide records decision d on approval step step of workflow id and
// returns the workflow's state afterwards (what enqueue approve prints).
// ErrNotWaiting if the step is not waiting for a decision; ErrNotFound
// for a workflow that does not exist.
func (c *Client) Decide(ctx context.Context, id, step string, d Decision) (string, error) {
	by := d.By
	if by == "" {
		by = "api"
	}
	return wrapped(c.c.Decide(ctx, id, step, d.Approve, d.Comment, by))
}

// Rerun runs a finished (or blocked) workflow again from step from: the
// steps before it keep their outputs; from and what follows it run again,
// in order, in the workflow's next run, whose number it returns.
// ErrNotFinished for a workflow still running.
func (c *Client) Rerun(ctx context.Context, id, from string) (int, error) {
	return wrapped(c.c.Rerun(ctx, id, from))
}

// ListOptions filters and pages List: State, Name, Limit (0: 50, at most
// 1000) and After (the last id of the previous page).
type ListOptions = producer.ListOptions

// List returns workflows newest first, filtered and paged by o, without
// their steps (Status reads one whole).
func (c *Client) List(ctx context.Context, o ListOptions) ([]Workflow, error) {
	ws, err := c.c.ListPage(ctx, o)
	if err != nil {
		return nil, wrap(err)
	}
	out := make([]Workflow, len(ws))
	for i, w := range ws {
		out[i] = *w
	}
	return out, nil
}

// Recent returns the newest workflows (at most limit, among the 1,000
// newest), in state when it is not "", each read whole with its steps:
// what enqueue list prints. A state that is not a workflow state is
// ErrUnknownState. List pages through every workflow without their steps,
// at a cost that does not grow with their width.
func (c *Client) Recent(ctx context.Context, state string, limit int) ([]Workflow, error) {
	ws, err := c.c.List(ctx, state, limit)
	if err != nil {
		return nil, wrap(err)
	}
	out := make([]Workflow, len(ws))
	for i, w := range ws {
		out[i] = *w
	}
	return out, nil
}

// CheckState returns nil for a workflow state (the State* constants) or
// "" (any state), and otherwise an error matching ErrUnknownState that
// names the states: a List or Recent filter checked before anything is
// sent.
func CheckState(state string) error { return producer.CheckState(state) }

// MaxInstancesPage is the most instances one Instances call returns (a
// larger limit is this).
const MaxInstancesPage = producer.MaxInstancesPage

// InstancePage is one page of a map step's instances.
type InstancePage = producer.InstancePage

// Instances reads instances [offset, offset+limit) of map step step (limit
// at most 500): a wide map is paged, never loaded whole.
func (c *Client) Instances(ctx context.Context, id, step string, offset, limit int) (*InstancePage, error) {
	return wrapped(c.c.Instances(ctx, id, step, offset, limit))
}

// ParkedStep is a dead letter: a step parked for a person's review, with
// its workflow, step, error class and reason.
type ParkedStep = producer.DeadLetter

// DeadLetters lists the dead letters, newest first.
func (c *Client) DeadLetters(ctx context.Context) ([]ParkedStep, error) {
	return wrapped(c.c.DeadLetters(ctx, ""))
}

// DeadLettersOfClass lists the dead letters of one failure class (e.g.
// "rate_limited"), newest first; ErrUnknownClass for a class that is not
// one.
func (c *Client) DeadLettersOfClass(ctx context.Context, class string) ([]ParkedStep, error) {
	return wrapped(c.c.DeadLetters(ctx, class))
}

// ParkedStepDetail is one dead letter with what a reviewer needs: its
// route, its prompt as rendered now from the stored inputs (a code step:
// its function and arguments), the errors of its last attempt, and an
// answer its output check rejected.
type ParkedStepDetail = producer.DeadLetterDetail

// DeadLetterDetail shows step of workflow id, parked in the dead-letter
// queue (the CLI's dlq show). ErrNoDeadLetter if it is not parked there.
func (c *Client) DeadLetterDetail(ctx context.Context, id, step string) (*ParkedStepDetail, error) {
	task, err := c.c.DeadLetterTask(ctx, id, step)
	if err != nil {
		return nil, wrap(err)
	}
	return c.DeadLetterTaskDetail(ctx, task)
}

// DeadLetterTaskDetail is DeadLetterDetail for a dead letter named by its
// task id (ParkedStep.TaskID, e.g. "wf_abc:summary"), as enqueue dlq show
// names it. ErrNoDeadLetter if no dead letter has that task id.
func (c *Client) DeadLetterTaskDetail(ctx context.Context, task string) (*ParkedStepDetail, error) {
	return wrapped(c.c.DeadLetterDetail(ctx, task))
}

// RequeueAll requeues every dead letter, or those of class (e.g.
// "rate_limited") when it is not empty, and returns how many;
// ErrUnknownClass for a class that is not one.
func (c *Client) RequeueAll(ctx context.Context, class string) (int, error) {
	return wrapped(c.c.RequeueAll(ctx, class))
}

// Requeue runs step of workflow id again from the dead-letter queue (its
// workflow resumes). ErrNoDeadLetter if the step is not parked there.
func (c *Client) Requeue(ctx context.Context, id, step string) error {
	task, err := c.c.DeadLetterTask(ctx, id, step)
	if err != nil {
		return wrap(err)
	}
	return c.RequeueTask(ctx, task)
}

// RequeueTask is Requeue for a dead letter named by its task id
// (ParkedStep.TaskID), as enqueue dlq requeue names it. ErrNoDeadLetter if
// no dead letter has that task id.
func (c *Client) RequeueTask(ctx context.Context, task string) error {
	return wrap(c.c.Requeue(ctx, task))
}

// Discard drops step of workflow id from the dead-letter queue: a workflow
// blocked on it ends failed.
func (c *Client) Discard(ctx context.Context, id, step string) error {
	task, err := c.c.DeadLetterTask(ctx, id, step)
	if err != nil {
		return wrap(err)
	}
	return c.DiscardTask(ctx, task)
}

// DiscardTask is Discard for a dead letter named by its task id
// (ParkedStep.TaskID), as enqueue dlq discard names it. ErrNoDeadLetter if
// no dead letter has that task id.
func (c *Client) DiscardTask(ctx context.Context, task string) error {
	return wrap(c.c.Discard(ctx, task))
}

// KeyInfo is one provider key as the workers share its state: its
// fingerprint (never the key), State (KeyOK, KeyCooling, KeyDisabled), why
// it was disabled, and how many live workers advertise it.
type KeyInfo = record.KeyInfo

// Key states of KeyInfo.
const (
	KeyOK       = record.KeyOK
	KeyCooling  = record.KeyCooling
	KeyDisabled = record.KeyDisabled
)

// ErrUnknownKey is returned by EnableKey for a fingerprint no live worker
// advertises (nor the client's configuration holds).
var ErrUnknownKey = record.ErrUnknownKey

// Keys lists the provider keys the live workers advertise (and the
// client's configuration holds), with their shared state.
func (c *Client) Keys(ctx context.Context) ([]KeyInfo, error) { return wrapped(c.c.Keys(ctx)) }

// EnableKey re-enables, for every worker, the key fingerprint names (a
// whole fingerprint, or its provider#N when that names one key) after a
// quota or auth failure disabled it. Enabling a key that is fine is not
// an error.
func (c *Client) EnableKey(ctx context.Context, fingerprint string) error {
	_, err := c.EnableKeyChanges(ctx, fingerprint)
	return err
}

// KeyChanges is what re-enabling keys did, by fingerprint: Enabled were
// disabled or cooling and are enabled now; NotChanged were neither.
type KeyChanges struct {
	Enabled    []string `json:"enabled"`
	NotChanged []string `json:"not_changed"`
}

// EnableKeyChanges is EnableKey saying what it did: the key's whole
// fingerprint in Enabled, or in NotChanged for a key that was fine (what
// enqueue keys enable prints). ErrUnknownKey for a fingerprint no live
// worker advertises (nor the client's configuration holds).
func (c *Client) EnableKeyChanges(ctx context.Context, fingerprint string) (KeyChanges, error) {
	res, err := c.c.EnableKeys(ctx, fingerprint, false)
	return KeyChanges{Enabled: res.Enabled, NotChanged: res.NotChanged}, wrap(err)
}

// EnableAllKeys re-enables, for every worker, every disabled or cooling
// key, and returns the fingerprints it enabled.
func (c *Client) EnableAllKeys(ctx context.Context) ([]string, error) {
	res, err := c.c.EnableKeys(ctx, "", true)
	return res.Enabled, wrap(err)
}
