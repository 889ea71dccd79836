package engine

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/hibiken/asynq"

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

// resolved is a step with the workflow's defaults applied.
type resolved struct {
	Route      string
	Timeout    time.Duration
	MaxRetries int
	Queue      string
}

func (s *Spec) resolve(st *Step) resolved {
	r := resolved{Route: st.Route, Timeout: time.Duration(st.Timeout), Queue: st.Queue}
	if r.Route == "" {
		r.Route = s.Defaults.Route
	}
	if r.Timeout == 0 {
		r.Timeout = time.Duration(s.Defaults.Timeout)
	}
	if r.Timeout == 0 {
		r.Timeout = DefaultTimeout
	}
	switch {
	case st.MaxRetries != nil:
		r.MaxRetries = *st.MaxRetries
	case s.Defaults.MaxRetries != nil:
		r.MaxRetries = *s.Defaults.MaxRetries
	default:
		r.MaxRetries = DefaultMaxRetries
	}
	if r.Queue == "" {
		r.Queue = s.Defaults.Queue
	}
	if r.Queue == "" {
		r.Queue = DefaultQueue
	}
	return r
}

// newStepTask builds the asynq task for one step. Retention keeps the
// finished task (and so its task id) as long as the workflow record.
func newStepTask(wf string, s *Spec, st *Step, gen int, retention time.Duration) (*asynq.Task, error) {
	return newTask(wf, st.ID, gen, s, st, retention)
}

// newTask builds the task that runs step id (st, or an instance of map
// step st) with st's settings.
func newTask(wf, id string, gen int, s *Spec, st *Step, retention time.Duration) (*asynq.Task, error) {
	t := queuedTask(wf, id, gen, s, st, retention)
	return asynq.NewTask(t.Type, t.Payload,
		asynq.TaskID(t.ID),
		asynq.Queue(t.Queue),
		asynq.Timeout(t.Timeout),
		asynq.MaxRetry(t.MaxRetry),
		asynq.Retention(t.Retention),
	), nil
}

// queuedTask is newTask's task as the store enqueues it itself
// (store.Task): the one description of a step's task both use.
func queuedTask(wf, id string, gen int, s *Spec, st *Step, retention time.Duration) store.Task {
	payload, _ := json.Marshal(tasks.Payload{Workflow: wf, Step: id, Gen: gen}) // strings and an int: cannot fail
	r := s.resolve(st)
	return store.Task{ID: StepTaskID(wf, id, gen), Queue: r.Queue, Type: tasks.TypeStep, Payload: payload,
		MaxRetry: r.MaxRetries, Timeout: r.Timeout, Retention: retention}
}
