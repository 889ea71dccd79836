package flow

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/tasks"
)

// ChildID is the id of the child workflow that step (or map instance) of
// workflow wf starts in run gen, attempt attempt: the same for a retried
// or redelivered task of that attempt (it finds the child it started, and
// never starts a second), another for a rerun or a requeued dead letter.
func ChildID(wf, step string, gen, attempt int) string {
	sum := sha256.Sum256([]byte("agentq child\x00" + wf + "\x00" + step + "\x00" + strconv.Itoa(gen) + "\x00" + strconv.Itoa(attempt)))
	return "wf_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:12]))
}

// MaxChildDepth bounds how deep child workflows nest (a spec that starts
// itself would nest without end); a cancel follows children as deep.
const MaxChildDepth = 32

// ChildEndedTaskID is the id of the task that tells a child workflow
// step its child ended (once per child run: a child rerun after it ended
// tells again).
func ChildEndedTaskID(l store.ParentLink) string {
	id := StepTaskID(l.Workflow, l.Step, l.Gen) + ":child-ended:" + strconv.Itoa(l.Attempt)
	if l.ChildGen > 0 {
		id += ":" + strconv.Itoa(l.ChildGen)
	}
	return id
}

// TellParent tells the step that started child workflow wf, if it is one,
// that wf ended in state (completed, failed, canceled, timed_out; blocked
// is not an end: a requeue may go on): a tasks.TypeChildEnded task, on the
// step's queue, once per child.
func TellParent(ctx context.Context, c *asynq.Client, st *store.Store, wf, state string) error {
	if !record.Terminal(state) {
		return nil
	}
	l, err := st.ParentOf(ctx, wf)
	if err != nil {
		return err
	}
	return TellParentOf(ctx, c, st, wf, state, l)
}

// TellParentOf is TellParent with wf's parent link read already (a
// settle that ended wf reads it: store.Settled.Parent); nil: wf is not a
// child.
func TellParentOf(ctx context.Context, c *asynq.Client, st *store.Store, wf, state string, l *store.ParentLink) error {
	if !record.Terminal(state) || l == nil {
		return nil
	}
	payload, _ := json.Marshal(tasks.Payload{Workflow: l.Workflow, Step: l.Step, Gen: l.Gen})
	t := asynq.NewTask(tasks.TypeChildEnded, payload, asynq.TaskID(ChildEndedTaskID(*l)), asynq.Queue(l.Queue),
		asynq.MaxRetry(spec.DefaultMaxRetries), asynq.Retention(st.Retention()))
	if _, err := c.EnqueueContext(ctx, t); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("tell the parent of %s it ended: %w", wf, err)
	}
	return nil
}

// ChildOutput is what a completed child workflow gives its parent step:
// its final step's output (as JSON: a JSON output as it is, text as a
// string, a dead optional step's null; a map step's, maps[id], the list of
// its instances'), or, with several final steps, an object of them keyed
// by step id.
func ChildOutput(wspec *spec.Spec, wf *record.Workflow, maps map[string]json.RawMessage) string {
	finals := wspec.Finals()
	value := func(id string) json.RawMessage {
		if m, ok := maps[id]; ok {
			return m
		}
		for _, s := range wf.Steps {
			if s.ID != id {
				continue
			}
			return OutputValue(wspec, id, s.Output, s.State == record.StepDone)
		}
		return json.RawMessage("null")
	}
	if len(finals) == 1 {
		return string(value(finals[0]))
	}
	out := make(map[string]json.RawMessage, len(finals))
	for _, id := range finals {
		out[id] = value(id)
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// OutputValue is step id's output as a JSON value: a JSON output as it
// is, text as a string; null for a step that is not done.
func OutputValue(wspec *spec.Spec, id, output string, done bool) json.RawMessage {
	if !done {
		return json.RawMessage("null")
	}
	if st, ok := wspec.Step(id); ok && spec.WantsJSON(st) && json.Valid([]byte(output)) {
		return json.RawMessage(output)
	}
	b, _ := json.Marshal(output)
	return b
}

// ScheduleDeadline schedules the task that ends workflow id timed out at
// at (nothing for a zero at), on its default queue, due at the second
// after it (asynq schedules by whole seconds).
func ScheduleDeadline(ctx context.Context, c *asynq.Client, id string, wspec *spec.Spec, at time.Time, retention time.Duration) error {
	if at.IsZero() {
		return nil
	}
	payload, _ := json.Marshal(tasks.Payload{Workflow: id, Step: "deadline"})
	queue := spec.DefaultQueue
	if wspec.Defaults.Queue != "" {
		queue = wspec.Defaults.Queue
	}
	queue = TaskQueue(id, spec.Resolved{Queue: queue, Shards: wspec.Shards[queue]})
	due := at.Truncate(time.Second).Add(time.Second)
	t := asynq.NewTask(tasks.TypeDeadline, payload, asynq.TaskID(id+":deadline"), asynq.Queue(queue), asynq.ProcessAt(due),
		asynq.MaxRetry(spec.DefaultMaxRetries), asynq.Timeout(time.Minute), asynq.Retention(retention))
	if _, err := c.EnqueueContext(ctx, t); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("schedule the deadline of %s: %w", id, err)
	}
	return nil
}
