// Package flow is what the engine and the producer client both do to a
// workflow's tasks and records: a step's task and its id, enqueueing a
// step or a map's instances, stopping a workflow's tasks, recording an
// approval's decision, the end notice to webhooks, a workflow's cost and
// its trace ids. Neither the engine nor the producer imports the other;
// what both do lives here, once.
package flow

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/shard"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/tasks"
)

// StepTaskID is the task id of a step in generation gen of its workflow
// (a rerun's tasks never collide with the ids asynq keeps of earlier
// ones).
func StepTaskID(wf, step string, gen int) string {
	if gen == 0 {
		return tasks.TaskID(wf, step)
	}
	return tasks.TaskID(wf, step) + "@" + strconv.Itoa(gen)
}

// SignalTimeoutTaskID is the id of the task that ends signal step step
// at its timeout in attempt attempt (tasks.TypeSignalTimeout): one per
// attempt, so a requeued dead letter waits again with a timeout of its own.
func SignalTimeoutTaskID(wf, step string, gen, attempt int) string {
	return StepTaskID(wf, step, gen) + ":signal-timeout:" + strconv.Itoa(attempt)
}

// newStepTask builds the asynq task for one step. Retention keeps the
// finished task (and so its task id) as long as the workflow record.
func newStepTask(wf string, s *spec.Spec, st *spec.Step, gen int, retention time.Duration) (*asynq.Task, error) {
	return NewTask(wf, st.ID, gen, s, st, retention)
}

// NewTask builds the task that runs step id (st, or an instance of map
// step st) with st's settings.
func NewTask(wf, id string, gen int, s *spec.Spec, st *spec.Step, retention time.Duration) (*asynq.Task, error) {
	t := QueuedTask(wf, id, gen, s, st, retention)
	return asynq.NewTask(t.Type, t.Payload,
		asynq.TaskID(t.ID),
		asynq.Queue(t.Queue),
		asynq.Timeout(t.Timeout),
		asynq.MaxRetry(t.MaxRetry),
		asynq.Retention(t.Retention),
	), nil
}

// QueuedTask is NewTask's task as the store enqueues it itself
// (store.Task): the one description of a step's task both use.
func QueuedTask(wf, id string, gen int, s *spec.Spec, st *spec.Step, retention time.Duration) store.Task {
	payload, _ := json.Marshal(tasks.Payload{Workflow: wf, Step: id, Gen: gen, Slack: int(HandoffSlack / time.Second), Shape: spec.ShapeOf(s)}) // strings and ints: cannot fail
	r := spec.Resolve(s, st)
	return store.Task{ID: StepTaskID(wf, id, gen), Queue: TaskQueue(wf, r), Type: tasks.TypeStep, Payload: payload,
		MaxRetry: r.MaxRetries, Timeout: r.Timeout + HandoffSlack, Retention: retention}
}

// TaskQueue is the asynq queue of a step's tasks in workflow wf: its
// queue, or the workflow's shard of it (internal/shard).
func TaskQueue(wf string, r spec.Resolved) string { return shard.Of(r.Queue, r.Shards, wf) }

// HandoffSlack is the time a step's task allows asynq beyond its step's
// timeout: the worker holds the step to its own timeout, and runs the
// steps it hands on in the same slot in the rest (engine/handoff.go).
const HandoffSlack = 5 * time.Minute
