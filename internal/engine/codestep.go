package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"log/slog"

	"github.com/agentq/agentq/internal/spec"
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
	steps        map[string]spec.StepView
	log          *slog.Logger
	d            *durable
	llm          *LLM
	inst         *spec.Instance       // set for an instance of a map step
	maps         map[string]mapSource // the map steps among its inputs
}

// mapSource reads one map step's outputs.
type mapSource struct {
	items int
	pages func(ctx context.Context) iter.Seq2[spec.StepView, error]
}

// Workflow is the workflow's id.
func (s *CodeStep) Workflow() string { return s.workflow }

// ID is the step's id in its spec.
func (s *CodeStep) ID() string { return s.id }

// Attempt counts the step's attempts, this one included (1 on the first).
func (s *CodeStep) Attempt() int { return s.attempt }

// Args decodes the step's arguments (its with:, rendered) into v, as
// encoding/json does, numbers into an any as json.Number. An error names
// the step and, returned by the step, dead-letters it at once: arguments
// that do not fit are not fixed by a retry.
func (s *CodeStep) Args(v any) error {
	if err := spec.DecodeJSON(s.args, v); err != nil {
		return ToDeadLetter(fmt.Errorf("step %s: arguments %s do not fit %T: %w", s.id, excerptJSON(s.args), v, err))
	}
	return nil
}

// RawArgs is the step's arguments as JSON ("null" when it has no with:).
func (s *CodeStep) RawArgs() json.RawMessage { return append(json.RawMessage(nil), s.args...) }

// Input is the workflow's input (numbers as json.Number, as everywhere a
// step sees a value as any).
func (s *CodeStep) Input() map[string]any { return s.input }

// Step returns an ancestor's output: its text, its parsed JSON (a code
// step's value, or a format: json answer), whether it was degraded, and
// Missing for an optional step that was dead-lettered. ok is false for a
// step that is not among this step's inputs.
func (s *CodeStep) Step(id string) (v spec.StepView, ok bool) {
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

// Item decodes, in an instance of a map step (for_each), its item into v,
// as Args does. Outside a map it is an error, and so is an item that does
// not fit v; returned by the step, either dead-letters it at once (a
// programming error, or data no retry changes).
func (s *CodeStep) Item(v any) error {
	if s.inst == nil {
		return ToDeadLetter(fmt.Errorf("step %s is not a map step's instance: it has no item (Item is for a step with for_each)", s.id))
	}
	b, _ := json.Marshal(s.inst.Item)
	if err := spec.DecodeJSON(b, v); err != nil {
		return ToDeadLetter(fmt.Errorf("step %s: item %s does not fit %T: %w", s.id, excerptJSON(b), v, err))
	}
	return nil
}

// Index is, in an instance of a map step, its item's position (from 0);
// -1 outside a map.
func (s *CodeStep) Index() int {
	if s.inst == nil {
		return -1
	}
	return s.inst.Index
}

// Outputs iterates over the outputs of map step id (one of this step's
// inputs) in item order, reading them from Redis a page at a time, so a
// reduce over 10,000 instances holds one page in memory. A missing
// instance (optional, dead-lettered) comes as a view with Missing set. A
// read that fails ends the iteration with the error; for a step that is
// not a map among this step's inputs, the only value is an error.
func (s *CodeStep) Outputs(ctx context.Context, id string) iter.Seq2[spec.StepView, error] {
	m, ok := s.maps[id]
	if !ok { // a programming error: returned by the step, it dead-letters it at once
		return func(yield func(spec.StepView, error) bool) {
			yield(spec.StepView{}, ToDeadLetter(fmt.Errorf("step %s: %q is not a map step among its inputs (Outputs reads a for_each step's instances)", s.id, id)))
		}
	}
	return m.pages(ctx)
}

// Items is how many instances map step id (one of this step's inputs)
// has; 0 for a step that is not a map among its inputs.
func (s *CodeStep) Items(id string) int { return s.maps[id].items }
