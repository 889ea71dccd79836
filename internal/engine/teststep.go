package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"sync"

	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// TestStepOptions describe a code step run outside a worker, for unit
// tests of its function (package agentqtest builds on it).
type TestStepOptions struct {
	Workflow, ID string // default "wf_test", "step"
	Args         any    // the step's arguments, as with: would give them (encoded as JSON)
	Input        map[string]any
	// Steps are its ancestors' outputs; a map ancestor's view comes from
	// spec.MapViewOf, and the step reads it with CodeStep.Outputs.
	Steps  map[string]spec.StepView
	Router Caller       // the model: LLM().Chat goes here
	Logger *slog.Logger // nil: discarded
	// Item, when not nil, makes the step an instance of a map step
	// (for_each) with this item (as its JSON decodes: numbers as
	// json.Number) at position Index: CodeStep.Item and Index answer.
	Item  any
	Index int
}

// TestStep runs attempts of one code step the way a worker does (a panic
// recovered, errors classified), with its durable calls kept in memory
// across attempts: the second Attempt gets the answers the first one
// stored, as a retried step does.
type TestStep struct {
	o    TestStepOptions
	args json.RawMessage
	mem  *memoryCalls
	inst *spec.Instance // a map instance's item, when Item was given

	mu       sync.Mutex
	attempt  int
	replayed int
	made     int
}

// NewTestStep returns a step to run attempts of.
func NewTestStep(o TestStepOptions) (*TestStep, error) {
	if o.Router == nil {
		return nil, fmt.Errorf("engine: NewTestStep: no Router (the model its LLM calls reach)")
	}
	if o.Workflow == "" {
		o.Workflow = "wf_test"
	}
	if o.ID == "" {
		o.ID = "step"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	args, err := json.Marshal(o.Args)
	if err != nil {
		return nil, fmt.Errorf("engine: NewTestStep: the arguments do not encode as JSON: %w", err)
	}
	for id, v := range o.Steps {
		if err := spec.MapBuildError(v.Map); err != nil {
			return nil, fmt.Errorf("engine: NewTestStep: step %s: %w", id, err)
		}
	}
	t := &TestStep{o: o, args: args, mem: &memoryCalls{calls: map[int]store.Call{}}}
	if o.Item != nil { // as a worker holds it: the item's JSON, decoded
		b, err := json.Marshal(o.Item)
		if err != nil {
			return nil, fmt.Errorf("engine: NewTestStep: the item does not encode as JSON: %w", err)
		}
		var item any
		if err := spec.DecodeJSON(b, &item); err != nil {
			return nil, fmt.Errorf("engine: NewTestStep: the item: %w", err)
		}
		t.inst = &spec.Instance{Index: max(o.Index, 0), Item: item}
	}
	return t, nil
}

// Attempt runs fn as the step's next attempt. A panic comes back as an
// error (a *PanicError inside), as the worker sees it.
func (t *TestStep) Attempt(ctx context.Context, fn StepFunc) (any, error) {
	t.mu.Lock()
	t.attempt++
	attempt := t.attempt
	t.mu.Unlock()
	t.mem.mu.Lock()
	stored := make(map[int]store.Call, len(t.mem.calls))
	for k, v := range t.mem.calls {
		stored[k] = v
	}
	t.mem.current = attempt
	t.mem.mu.Unlock()
	d := &durable{wf: t.o.Workflow, step: t.o.ID, attempt: attempt, st: t.mem, log: t.o.Logger, stored: stored}
	s := &CodeStep{workflow: t.o.Workflow, id: t.o.ID, attempt: attempt, args: t.args, input: t.o.Input, steps: t.o.Steps,
		log: t.o.Logger, d: d, llm: &LLM{d: d, router: t.o.Router}, inst: t.inst, maps: map[string]mapSource{}}
	cloned := false
	for id, v := range t.o.Steps {
		if m := v.Map; m != nil {
			views := spec.InstanceViews(m)
			s.maps[id] = mapSource{items: len(views), pages: func(context.Context) iter.Seq2[spec.StepView, error] { return seqOf(views) }}
			// as on a worker, Step(id) is the map step's own record (an
			// empty map's is an empty list): a code step reads the
			// instances with Outputs
			if !cloned {
				s.steps, cloned = maps.Clone(t.o.Steps), true
			}
			switch {
			case v.Missing: // dead-lettered before it expanded
				s.steps[id] = spec.StepView{Missing: true}
			case len(views) == 0:
				s.steps[id] = spec.StepView{Output: "[]", JSON: []any{}}
			default:
				s.steps[id] = spec.StepView{}
			}
		}
	}
	out, err := callStep(ctx, fn, s)
	t.mu.Lock()
	t.replayed += d.replayed
	t.made += d.made
	t.mu.Unlock()
	return out, err
}

// Replayed counts durable calls answered from an earlier attempt's store;
// Made counts those that ran (reached the model or ran Do's function).
func (t *TestStep) Replayed() int { t.mu.Lock(); defer t.mu.Unlock(); return t.replayed }

// Made: see Replayed.
func (t *TestStep) Made() int { t.mu.Lock(); defer t.mu.Unlock(); return t.made }

// memoryCalls is a callStore in memory, fenced by attempt like the store.
type memoryCalls struct {
	mu      sync.Mutex
	current int
	calls   map[int]store.Call
}

func (m *memoryCalls) SaveCall(_ context.Context, _, _ string, _, attempt, seq int, c store.Call) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if attempt < m.current {
		return fmt.Errorf("save call %d of attempt %d (current %d): %w", seq, attempt, m.current, store.ErrStaleAttempt)
	}
	m.calls[seq] = c
	return nil
}

// seqOf yields views, as a worker's CodeStep.Outputs yields a map's
// instances' records.
func seqOf(views []spec.StepView) iter.Seq2[spec.StepView, error] {
	return func(yield func(spec.StepView, error) bool) {
		for _, v := range views {
			if !yield(v, nil) {
				return
			}
		}
	}
}
