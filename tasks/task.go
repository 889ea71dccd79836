package tasks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/store"
)

// TypeStep is the asynq task type of a workflow step.
const TypeStep = "agentq:step"

// Payload is all a step task carries: ids, never prompts or keys.
type Payload struct {
	Workflow string `json:"wf"`
	Step     string `json:"step"`
	// Gen is the workflow's generation the task belongs to (0, one more
	// at each rerun); a task of an earlier one does nothing.
	Gen int `json:"gen,omitempty"`
}

// TaskID is the deterministic asynq task id of a step: enqueuing the same
// step twice is a no-op while the first task is kept.
func TaskID(wf, step string) string { return wf + ":" + step }

// genTaskID is the task id of a step in generation gen of its workflow
// (a rerun's tasks never collide with the ids asynq keeps of earlier
// ones).
func genTaskID(wf, step string, gen int) string {
	if gen == 0 {
		return TaskID(wf, step)
	}
	return TaskID(wf, step) + "@" + strconv.Itoa(gen)
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
	payload, _ := json.Marshal(Payload{Workflow: wf, Step: id, Gen: gen}) // strings and an int: cannot fail
	r := s.resolve(st)
	return store.Task{ID: genTaskID(wf, id, gen), Queue: r.Queue, Type: TypeStep, Payload: payload,
		MaxRetry: r.MaxRetries, Timeout: r.Timeout, Retention: retention}
}

func decodePayload(b []byte) (Payload, error) {
	if p, ok := canonicalPayload(b); ok {
		return p, nil
	}
	var p Payload
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("payload is not JSON: %w", err)
	}
	if p.Workflow == "" || p.Step == "" {
		return p, fmt.Errorf("payload lacks wf or step")
	}
	return p, nil
}

// canonicalPayload reads a payload in the exact form newTask writes
// (`{"wf":"…","step":"…"}` or with `,"gen":N` last, ids without escapes)
// without encoding/json, whose reflection costs a step task more than the
// rest of its decoding; anything else reports false and goes the long way.
func canonicalPayload(b []byte) (Payload, bool) {
	var p Payload
	rest, ok := bytes.CutPrefix(b, []byte(`{"wf":"`))
	if !ok {
		return p, false
	}
	wf, rest, ok := cutID(rest)
	if !ok {
		return p, false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"step":"`)); !ok {
		return p, false
	}
	step, rest, ok := cutID(rest)
	if !ok {
		return p, false
	}
	if gen, ok := bytes.CutPrefix(rest, []byte(`,"gen":`)); ok {
		digits, ok := bytes.CutSuffix(gen, []byte("}"))
		// json.Marshal writes no leading zero and omits 0 (omitempty)
		if !ok || len(digits) == 0 || len(digits) > 9 || digits[0] < '1' || digits[0] > '9' {
			return p, false
		}
		for _, c := range digits {
			if c < '0' || c > '9' {
				return p, false
			}
			p.Gen = p.Gen*10 + int(c-'0')
		}
	} else if string(rest) != "}" {
		return p, false
	}
	p.Workflow, p.Step = string(wf), string(step)
	return p, p.Workflow != "" && p.Step != ""
}

// cutID cuts a JSON string's body up to its closing quote; false if it
// has an escape or a byte json.Marshal would have escaped.
func cutID(b []byte) (id, rest []byte, ok bool) {
	for i, c := range b {
		switch {
		case c == '"':
			return b[:i], b[i+1:], true
		case c == '\\' || c < 0x20 || c >= 0x80 || c == '<' || c == '>' || c == '&':
			return nil, nil, false
		}
	}
	return nil, nil, false
}
