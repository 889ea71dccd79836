// Package agentqtest unit-tests a code step's function without Redis or a
// provider: a scripted model, the step's arguments and ancestors, and the
// same durable-call semantics as a worker (a second attempt gets the
// answers the first one stored).
//
//	m := agentqtest.NewModel().Answer("report", "three regions grew")
//	s, _ := agentqtest.NewStep(agentqtest.Options{Args: map[string]any{"query": "SELECT 1"}, Model: m})
//	out, err := s.Run(ctx, runSQL)
package agentqtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/stepfunc"
	"github.com/agentq/agentq/llmclient"
)

// Model is a scripted model: per route, a queue of answers (or errors)
// given out in order, and a record of every request. Safe for concurrent
// use.
type Model struct {
	mu      sync.Mutex
	queue   map[string][]reply
	fn      map[string]func(llmclient.Request) (*llmclient.Response, error)
	request map[string][]llmclient.Request
}

type reply struct {
	resp *llmclient.Response
	err  error
}

// ErrNoAnswer is what a route with no scripted answer left returns.
var ErrNoAnswer = errors.New("agentqtest: no scripted answer left for this route")

// NewModel returns a model with nothing scripted.
func NewModel() *Model {
	return &Model{queue: map[string][]reply{}, fn: map[string]func(llmclient.Request) (*llmclient.Response, error){},
		request: map[string][]llmclient.Request{}}
}

// Answer queues a text answer on route.
func (m *Model) Answer(route, text string) *Model {
	return m.Respond(route, &llmclient.Response{Text: text, Provider: "agentqtest", Model: route, FinishReason: llmclient.FinishStop})
}

// Respond queues a whole response (tool calls, usage) on route.
func (m *Model) Respond(route string, r *llmclient.Response) *Model {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queue[route] = append(m.queue[route], reply{resp: r})
	return m
}

// Fail queues a failure on route: any error, which the step meets as it
// would meet the router's (VerdictOf reads it as the worker does).
func (m *Model) Fail(route string, err error) *Model {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queue[route] = append(m.queue[route], reply{err: err})
	return m
}

// Func answers every request on route with fn once its queue is empty.
func (m *Model) Func(route string, fn func(llmclient.Request) (*llmclient.Response, error)) *Model {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fn[route] = fn
	return m
}

// Requests returns the requests route received, in order.
func (m *Model) Requests(route string) []llmclient.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]llmclient.Request(nil), m.request[route]...)
}

// Chat implements the router's Chat for the step.
func (m *Model) Chat(ctx context.Context, route string, req llmclient.Request) (*llmclient.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.request[route] = append(m.request[route], req)
	var r reply
	q := m.queue[route]
	fn := m.fn[route]
	switch {
	case len(q) > 0:
		r, m.queue[route] = q[0], q[1:]
	case fn != nil:
		m.mu.Unlock()
		return fn(req)
	default:
		r.err = fmt.Errorf("%w (route %q)", ErrNoAnswer, route)
	}
	m.mu.Unlock()
	if r.err != nil {
		return nil, r.err
	}
	resp := *r.resp
	return &resp, nil
}

// routes is the model as the worker's router: every route exists.
type routes struct{ *Model }

func (routes) Route(name string) (router.Route, bool) { return router.Route{Name: name}, true }

// Options describe the step under test.
type Options struct {
	Workflow, ID string // default "wf_test", "step"
	Args         any    // the step's arguments (what with: would give), encoded as JSON
	Input        map[string]any
	// Steps are the ancestors' outputs, by step id; a map ancestor's is
	// Map(…).
	Steps map[string]agentq.StepView
	Model *Model // default: a model with nothing scripted
	// Item, when not nil, makes the step an instance of a map step
	// (for_each): s.Item decodes it and s.Index is Index.
	Item  any
	Index int
}

// Missing is a map instance that was dead-lettered (an optional step's):
// give it to Map in its place. The step reads it as a view with Missing
// set, and a nil in the map's Outputs.
var Missing = agentq.StepView{Missing: true}

// MissingMap is an optional map step dead-lettered before it expanded
// (its for_each failed), for Options.Steps: as in a worker, the step reads
// it as Missing, and s.Outputs yields no instance.
func MissingMap() agentq.StepView { return agentq.StepView{Missing: true, Map: spec.MapViewOf()} }

// Text is a prompt instance's answer, for Map: its text, with no JSON.
func Text(answer string) agentq.StepView { return agentq.StepView{Output: answer} }

// Map is a map step (for_each) among the step's ancestors, its instances'
// outputs in item order, for Options.Steps: the step reads them with
// s.Outputs (and s.Items), as a fan-in over the map does in a worker; as
// in a worker, s.Step gives the map step's own record, not its outputs
// (a worker adds them, as StepView.Map, only when the step's with: reads
// the map).
//
// Each output is what a code instance returned (any JSON value: the view's
// JSON holds it as the worker decodes it, numbers as json.Number, and its
// Output the JSON text), or an agentq.StepView taken as it is: Text(…) for
// a prompt instance's answer, Missing for a dead-lettered one. A value
// that does not encode as JSON makes NewStep fail, naming it.
func Map(outputs ...any) agentq.StepView {
	views := make([]agentq.StepView, len(outputs))
	for i, o := range outputs {
		switch o := o.(type) {
		case agentq.StepView:
			views[i] = o
		default:
			b, err := json.Marshal(o)
			if err != nil {
				return agentq.StepView{Map: spec.MapViewError(fmt.Errorf("agentqtest.Map: output %d does not encode as JSON: %w", i, err))}
			}
			views[i] = spec.JSONView(string(b))
		}
	}
	return agentq.StepView{Map: spec.MapViewOf(views...)}
}

// Step runs attempts of one code step.
type Step struct{ t *engine.TestStep }

// NewStep returns a step to run attempts of.
func NewStep(o Options) (*Step, error) {
	if o.Model == nil {
		o.Model = NewModel()
	}
	t, err := engine.NewTestStep(engine.TestStepOptions{Workflow: o.Workflow, ID: o.ID, Args: o.Args, Input: o.Input, Steps: o.Steps, Router: routes{o.Model},
		Item: o.Item, Index: o.Index})
	if err != nil {
		return nil, err
	}
	return &Step{t: t}, nil
}

// Run runs fn as the step's next attempt and returns what the worker would
// store (the value) or act on (the error: errors.Is and errors.As see what
// fn returned; a panic is an error saying so, with its stack). Durable
// calls answered in earlier attempts are replayed. A nil fn is an error.
func (s *Step) Run(ctx context.Context, fn agentq.StepFunc) (any, error) {
	if fn == nil {
		return nil, errors.New("agentqtest: Run: the function is nil")
	}
	return s.t.Attempt(ctx, stepfunc.Of(fn))
}

// Replayed counts durable calls answered from an earlier attempt; Made
// counts those that reached the model or ran Do's function.
func (s *Step) Replayed() int { return s.t.Replayed() }

// Made: see Replayed.
func (s *Step) Made() int { return s.t.Made() }

// Verdict is what an error from Run asks of the queue, as the worker
// reads it (VerdictOf).
type Verdict struct {
	// Kind is "dead_letter", "degrade", "retry_after" or "retry".
	Kind string
	// After is, for "retry_after", the delay the step asked for.
	After time.Duration
	// Fallback is, for "degrade", the output the step finishes with.
	Fallback any
}

// VerdictOf reads a step's error as the worker would: "dead_letter",
// "degrade" (with the fallback), "retry_after" (with the delay) or "retry".
func VerdictOf(err error) Verdict {
	v := engine.VerdictOf(err)
	return Verdict{Kind: v.Kind, After: v.After, Fallback: v.Fallback}
}
