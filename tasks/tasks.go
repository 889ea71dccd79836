// Package tasks is the format of the asynq tasks agentq enqueues: their
// types, their payload and their ids. It is for people who look at
// agentq's queues with asynq's own tools (asynqmon, the asynq CLI, an
// Inspector): what a task is, which workflow and step it runs. Workers and
// producers are built with the root package, agentq.
//
// A step task carries ids only, never a prompt, an output or a key: the
// workflow's record in Redis holds the rest.
package tasks

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// TypeStep is the asynq task type of a workflow step.
const TypeStep = "agentq:step"

// The other task types a worker serves begin with TypeStep, so its step
// handler serves them (asynq's ServeMux matches task types by prefix).
const (
	// TypeDeadline ends a workflow at its deadline.
	TypeDeadline = TypeStep + ":deadline"
	// TypeApprovalTimeout rejects an approval step no one decided in time.
	TypeApprovalTimeout = TypeStep + ":approval-timeout"
	// TypeSignalTimeout dead-letters a signal step (wait_for:) no signal
	// completed in time. It runs as the step's own task does (the same
	// payload), so its dead letter is the step's and a requeue waits again.
	TypeSignalTimeout = TypeStep + ":signal-timeout"
	// TypeChildEnded tells a child workflow step (workflow:) that its
	// child ended. It runs as the step's own task does (the same payload),
	// so a child's failure is the step's dead letter, and a requeue runs
	// the step again (a new child).
	TypeChildEnded = TypeStep + ":child-ended"
	// TypeDecided is a person's decision that ended its workflow
	// (completed, or blocked by another step), handed to a worker: the
	// worker counts the step and the workflow's end in its metrics and
	// sends the end's webhook, as it does for every other ending (a
	// decision is taken wherever the person is, where there are no
	// metrics and may be no webhook secret).
	TypeDecided = TypeStep + ":decided"
	// TypeCancelTree cancels the workflows under a canceled one (its
	// children, theirs, …): a cancel enqueues it before it marks the
	// workflow canceled, and returns; a worker walks the tree.
	TypeCancelTree = TypeStep + ":cancel-tree"
)

// RunsStep reports whether a task of type typ runs a step's attempt (its
// own task, or a signal step's timeout): its dead letter is the step's.
func RunsStep(typ string) bool {
	return typ == TypeStep || typ == TypeSignalTimeout || typ == TypeChildEnded
}

// Payload is all a step task carries: ids, never prompts or keys.
type Payload struct {
	Workflow string `json:"wf"`
	Step     string `json:"step"` // a map instance's is "<map>[<n>]"
	// Gen is the workflow's generation the task belongs to (0, one more
	// at each rerun); a task of an earlier one does nothing.
	Gen int `json:"gen,omitempty"`
	// Slack is how many seconds the task's asynq timeout exceeds its
	// step's: the worker holds the step to its own timeout and uses the
	// rest for the steps the task hands on in its slot. 0: none (a task
	// of an earlier version).
	Slack int `json:"slack,omitempty"`
	// Shape names the shape of the workflow's spec (all of it but its
	// input): a worker that knows the shape begins the step without
	// reading the spec first. Empty: not named (a task of an earlier
	// version, or one enqueued without it).
	Shape string `json:"shape,omitempty"`
}

// TaskID is the deterministic asynq task id of a step (in a workflow's
// first run; a rerun's tasks have "@<gen>" after it): enqueuing the same
// step twice is a no-op while the first task is kept.
func TaskID(wf, step string) string { return wf + ":" + step }

// DecodePayload reads a task's payload; it refuses one without both ids.
func DecodePayload(b []byte) (Payload, error) {
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

// canonicalPayload reads a payload in the exact form json.Marshal writes
// a Payload (`{"wf":"…","step":"…"}`, then `,"gen":N`, `,"slack":N` and `,"shape":"…"` if set, ids without
// escapes) without encoding/json, whose reflection costs a step task more
// than the rest of its decoding; anything else reports false and goes
// the long way.
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
	if rest, ok = cutInt(rest, `,"gen":`, &p.Gen); !ok {
		return p, false
	}
	if rest, ok = cutInt(rest, `,"slack":`, &p.Slack); !ok {
		return p, false
	}
	var shape []byte
	if r, found := bytes.CutPrefix(rest, []byte(`,"shape":"`)); found {
		if shape, rest, ok = cutID(r); !ok || len(shape) == 0 {
			return p, false
		}
	}
	if string(rest) != "}" {
		return p, false
	}
	p.Workflow, p.Step, p.Shape = string(wf), string(step), string(shape)
	return p, p.Workflow != "" && p.Step != ""
}

// cutInt reads the field name's positive number into v if b starts with
// name (json.Marshal writes no leading zero and omits 0: omitempty), and
// returns the rest; b as it is without it; false for anything else.
func cutInt(b []byte, name string, v *int) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(name))
	if !ok {
		return b, true
	}
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == 0 || n > 9 || rest[0] == '0' {
		return nil, false
	}
	for _, c := range rest[:n] {
		*v = *v*10 + int(c-'0')
	}
	return rest[n:], true
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
