package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
)

// StepFunc is a code step's function (a spec step with run: NAME). It gets
// the step's arguments and its ancestors' outputs through s and returns a
// JSON-able value, stored as the step's output (downstream steps read it
// as .Steps.<id>.JSON, as they read a format: json answer). A returned
// error steers the step: see RetryAfter, ToDeadLetter and Degrade; any other
// error (or a panic) is class handler, retried with the step's backoff.
// ctx ends at the step's timeout.
type StepFunc func(ctx context.Context, s *CodeStep) (any, error)

// CodeStep is one attempt of a code step, as its function sees it.
type CodeStep struct {
	workflow, id string
	attempt      int
	args         json.RawMessage
	input        map[string]any
	steps        map[string]StepView
	log          *slog.Logger
	d            *durable
	llm          *LLM
}

// Workflow is the workflow's id.
func (s *CodeStep) Workflow() string { return s.workflow }

// ID is the step's id in its spec.
func (s *CodeStep) ID() string { return s.id }

// Attempt counts the step's attempts, this one included (1 on the first).
func (s *CodeStep) Attempt() int { return s.attempt }

// Args decodes the step's arguments (its with:, rendered) into v, as
// encoding/json does. An error names the step.
func (s *CodeStep) Args(v any) error {
	if err := json.Unmarshal(s.args, v); err != nil {
		return fmt.Errorf("step %s: arguments %s do not fit %T: %w", s.id, excerptJSON(s.args), v, err)
	}
	return nil
}

// RawArgs is the step's arguments as JSON ("null" when it has no with:).
func (s *CodeStep) RawArgs() json.RawMessage { return append(json.RawMessage(nil), s.args...) }

// Input is the workflow's input.
func (s *CodeStep) Input() map[string]any { return s.input }

// Step returns an ancestor's output: its text, its parsed JSON (a code
// step's value, or a format: json answer), whether it was degraded, and
// Missing for an optional step that was dead-lettered. ok is false for a
// step that is not among this step's inputs.
func (s *CodeStep) Step(id string) (v StepView, ok bool) {
	v, ok = s.steps[id]
	return v, ok
}

// LLM is the model, through the worker's router, with every answer kept
// durably (see LLM.Chat).
func (s *CodeStep) LLM() *LLM { return s.llm }

// Logger logs with the workflow and step ids attached.
func (s *CodeStep) Logger() *slog.Logger { return s.log }

func excerptJSON(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
