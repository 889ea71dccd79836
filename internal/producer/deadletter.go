package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/retry"
	"github.com/agentq/agentq/tasks"
)

// DeadLetter is a step that was dead-lettered (archived by asynq) and waits
// for a person: requeue it once the cause is fixed, or discard it.
type DeadLetter struct {
	TaskID   string    `json:"task"`
	Queue    string    `json:"queue"`
	Workflow string    `json:"workflow"`
	Step     string    `json:"step"`
	Class    string    `json:"class"`  // the error class that ended it, e.g. bad_request
	Reason   string    `json:"reason"` // the last error, as asynq's archive and asynqmon show it
	FailedAt time.Time `json:"failed_at"`
	Attempts int       `json:"attempts"`
	taskType string    // the archived task's type
}

// DeadLetterDetail is one dead letter with what a reviewer needs.
type DeadLetterDetail struct {
	DeadLetter
	Route  string `json:"route"`
	System string `json:"system,omitempty"`
	Prompt string `json:"prompt"` // as rendered now from the stored inputs
	// StepError is the step's recorded error: every call of its last
	// attempt, each with the provider's status, type, code and message.
	StepError string `json:"step_error"`
	// RejectedOutput is, for a step dead-lettered as invalid_output, the
	// last answer that failed its output check.
	RejectedOutput string `json:"rejected_output,omitempty"`
}

// ErrNoDeadLetter is returned for a task that is not in the archive.
var ErrNoDeadLetter = errors.New("no such dead letter")

// ErrUnknownClass is returned for a class that is not one of
// retry.Classes().
var ErrUnknownClass = errors.New("unknown class")

// DeadLetters lists dead-lettered steps in every queue, newest first; with
// class, only those of that class (ErrUnknownClass for one that is not a
// class).
func (c *Client) DeadLetters(ctx context.Context, class string) ([]DeadLetter, error) {
	if class != "" && !slices.Contains(retry.Classes(), retry.Class(class)) {
		return nil, fmt.Errorf("%w %q: one of %v", ErrUnknownClass, class, retry.Classes())
	}
	queues, err := c.insp.Queues()
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	var out []DeadLetter
	for _, q := range queues {
		for page := 1; ; page++ {
			infos, err := c.insp.ListArchivedTasks(q, asynq.PageSize(500), asynq.Page(page))
			if err != nil {
				return nil, fmt.Errorf("list dead letters in %s: %w", q, err)
			}
			for _, info := range infos {
				if d, ok := c.deadLetter(ctx, info); ok && (class == "" || d.Class == class) {
					out = append(out, d)
				}
			}
			if len(infos) < 500 {
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FailedAt.After(out[j].FailedAt) })
	return out, nil
}

func (c *Client) deadLetter(ctx context.Context, info *asynq.TaskInfo) (DeadLetter, bool) {
	if !tasks.RunsStep(info.Type) {
		return DeadLetter{}, false
	}
	d := DeadLetter{TaskID: info.ID, Queue: info.Queue, Reason: reasonOf(info.LastErr), FailedAt: info.LastFailedAt, Attempts: info.Retried + 1, taskType: info.Type}
	if cl, _, ok := strings.Cut(info.LastErr, ":"); ok && slices.Contains(retry.Classes(), retry.Class(cl)) {
		d.Class = cl // a reason begins with its class ("m[3]: …" does not name one)
	}
	p, err := tasks.DecodePayload(info.Payload)
	if err != nil {
		d.Step = "(unreadable payload)"
		return d, true
	}
	d.Workflow, d.Step = p.Workflow, p.Step
	if wf, err := c.store.Get(ctx, p.Workflow); err == nil {
		for _, s := range wf.Steps {
			if s.ID == p.Step {
				d.Attempts = s.Attempts
				if s.Class != "" {
					d.Class = s.Class // the record's own field; the reason's prefix only for older records
				}
			}
		}
	}
	return d, true
}

// findArchived returns the archived task with this id, in whatever queue.
func (c *Client) findArchived(taskID string) (*asynq.TaskInfo, error) {
	queues, err := c.insp.Queues()
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	for _, q := range queues {
		info, err := c.insp.GetTaskInfo(q, taskID)
		if err == nil && info.State == asynq.TaskStateArchived {
			return info, nil
		}
	}
	return nil, fmt.Errorf("task %s: %w", taskID, ErrNoDeadLetter)
}

// DeadLetterDetail returns one dead letter with its rendered prompt and
// the errors of its last attempt.
func (c *Client) DeadLetterDetail(ctx context.Context, taskID string) (*DeadLetterDetail, error) {
	info, err := c.findArchived(taskID)
	if err != nil {
		return nil, err
	}
	d, _ := c.deadLetter(ctx, info)
	out := &DeadLetterDetail{DeadLetter: d}
	if d.Workflow == "" {
		return out, nil
	}
	wspec, err := c.spec(ctx, d.Workflow)
	if err != nil {
		return out, nil // the workflow expired; the task is all there is
	}
	if err := spec.Prepare(wspec); err != nil {
		return out, nil
	}
	st, inst, ok := spec.StepOf(wspec, d.Step)
	if !ok {
		return out, nil
	}
	out.Route = spec.Resolve(wspec, st).Route
	wf, err := c.store.Get(ctx, d.Workflow)
	if err != nil {
		return out, nil
	}
	views := map[string]spec.StepView{}
	for _, s := range wf.Steps {
		views[s.ID] = spec.ViewOf(wspec, s.ID, s.Output, s.Degraded, s.State != store.StepDone)
		if s.ID == d.Step {
			out.noteStep(s)
		}
	}
	if inst != nil {
		if page, err := c.store.Instances(ctx, d.Workflow, st.ID, inst.Index, 1); err == nil && len(page) == 1 {
			out.noteStep(page[0])
		}
		raw, _ := c.store.Item(ctx, d.Workflow, st.ID, inst.Index)
		inst.Item, _ = spec.DecodeItem(raw)
	}
	data := spec.DataOf(wspec.Input, views, inst)
	out.System, out.Prompt = spec.KindOf(st).Input(ctx, st, data)
	return out, nil
}

// noteStep takes the dead step's error and rejected answer from its record.
func (d *DeadLetterDetail) noteStep(s StepRecord) {
	d.StepError = s.Error
	if s.State == store.StepDead {
		d.RejectedOutput = s.Output
	}
}

// Requeue sends a dead-lettered step back to its queue; its workflow
// resumes from there.
func (c *Client) Requeue(ctx context.Context, taskID string) error {
	info, err := c.findArchived(taskID)
	if err != nil {
		return err
	}
	if p, err := tasks.DecodePayload(info.Payload); err == nil {
		// back under the reconciler's eye: a blocked workflow may have left
		// the open index
		if err := c.store.Watch(ctx, p.Workflow); err != nil {
			return fmt.Errorf("requeue %s: %w", taskID, err)
		}
		if err := c.markWaitEnd(ctx, info.Type, p); err != nil {
			return fmt.Errorf("requeue %s: %w", taskID, err)
		}
	}
	if err := c.insp.RunTask(info.Queue, info.ID); err != nil {
		return fmt.Errorf("requeue %s: %w", taskID, err)
	}
	if err := c.store.Confirm(ctx, store.QueueKey(info.Queue)); err != nil {
		return fmt.Errorf("requeue %s: %w", taskID, err)
	}
	return nil
}

// RequeueAll requeues every dead letter (of class, if not empty) and
// returns how many.
func (c *Client) RequeueAll(ctx context.Context, class string) (int, error) {
	dls, err := c.DeadLetters(ctx, class)
	if err != nil {
		return 0, err
	}
	n, confirm := 0, map[string]bool{}
	for _, d := range dls {
		if d.Workflow != "" {
			if err := c.store.Watch(ctx, d.Workflow); err != nil {
				return n, fmt.Errorf("requeue %s: %w", d.TaskID, err)
			}
			if err := c.markWaitEnd(ctx, d.taskType, tasks.Payload{Workflow: d.Workflow, Step: d.Step}); err != nil {
				return n, fmt.Errorf("requeue %s: %w", d.TaskID, err)
			}
		}
		if err := c.insp.RunTask(d.Queue, d.TaskID); err != nil {
			return n, fmt.Errorf("requeue %s: %w", d.TaskID, err)
		}
		n++
		confirm[d.Queue] = true
	}
	for q := range confirm {
		if err := c.store.Confirm(ctx, store.QueueKey(q)); err != nil {
			return n, fmt.Errorf("requeue: %w", err)
		}
	}
	return n, nil
}

// Discard deletes a dead letter for good. Its workflow, blocked on it,
// becomes failed; an optional step's workflow has already gone on. The
// dead letter is deleted last, once the workflow is failed, its end told
// and the cancel of its children queued: a discard cut short anywhere
// leaves the dead letter, and discarding it again finishes the rest.
func (c *Client) Discard(ctx context.Context, taskID string) error {
	info, err := c.findArchived(taskID)
	if err != nil {
		return err
	}
	if err := c.failFor(ctx, info); err != nil {
		return err
	}
	if err := c.insp.DeleteTask(info.Queue, info.ID); err != nil {
		return fmt.Errorf("discard %s: %w", taskID, err)
	}
	return nil
}

// failFor fails the workflow blocked on a dead letter being discarded:
// its end told (webhook, parent) and its children's cancel queued (a
// failed workflow's children have no one to tell). A workflow not blocked
// (an optional step's dead letter), or gone, is left alone.
func (c *Client) failFor(ctx context.Context, info *asynq.TaskInfo) error {
	var p tasks.Payload
	if json.Unmarshal(info.Payload, &p) != nil || p.Workflow == "" {
		return nil
	}
	state, err := c.store.Fail(ctx, p.Workflow)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if state != record.StateFailed {
		return nil // not blocked (an optional step's dead letter): it goes on
	}
	if wspec, err := c.spec(ctx, p.Workflow); err == nil {
		if err := flow.NotifyEnd(ctx, c.asynq, c.store, c.o.Webhooks, p.Workflow, wspec, record.StateFailed); err != nil {
			return err
		}
	}
	if err := flow.TellParent(ctx, c.asynq, c.store, p.Workflow, record.StateFailed); err != nil {
		return err
	}
	return c.cancelChildren(ctx, p.Workflow, 0)
}

// markWaitEnd marks the step of a wait's end task (a signal step's
// timeout, a child's end) requeued, so the task starts the step over.
func (c *Client) markWaitEnd(ctx context.Context, typ string, p tasks.Payload) error {
	if typ != tasks.TypeSignalTimeout && typ != tasks.TypeChildEnded {
		return nil
	}
	return c.store.MarkRequeued(ctx, p.Workflow, p.Step)
}

// reasonOf is an archived task's last error as people read it: without
// asynq's ": skip retry for the task", which only says how it was archived.
func reasonOf(lastErr string) string {
	return strings.TrimSuffix(lastErr, ": "+asynq.SkipRetry.Error())
}
