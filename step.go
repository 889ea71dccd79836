package agentq

import (
	"context"
	"encoding/json"
	"iter"
	"log/slog"

	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/stepfunc"
)

// Step is one attempt of a code step (a spec step with run: NAME), as its
// function sees it: its arguments (Args, RawArgs), the workflow's input
// (Input), its ancestors' outputs (Step, and Outputs for a map ancestor),
// a map instance's item (Item, Index), the model through the worker's
// router with durable answers (LLM), and a logger (Logger).
//
// The errors of Args and Item, and of Outputs for a step that is not a
// map among the step's inputs, are meant to be returned by the step as
// they are (wrapped or not): they say what is wrong, and dead-letter the
// step at once, since no retry changes them.
type Step struct {
	s   *engine.CodeStep
	llm LLM
}

// StepFunc is a code step's function, registered with Worker.HandleStep.
// It gets the step's arguments and its ancestors' outputs through s and
// returns a JSON-able value, stored as the step's output; downstream steps
// read it as .Steps.<id>.JSON (and Decode reads it from a record). A
// returned error steers the step: RetryAfter, DeadLetter and Degrade say
// how; any other error, or a panic, is class handler, retried with the
// step's backoff. ctx ends at the step's timeout.
type StepFunc func(ctx context.Context, s *Step) (any, error)

// stepOf is the SDK's view of the engine's step.
func stepOf(cs *engine.CodeStep) *Step { return &Step{s: cs, llm: LLM{l: cs.LLM()}} }

// engineFunc is fn as the engine runs it.
func (fn StepFunc) engineFunc() engine.StepFunc {
	return func(ctx context.Context, cs *engine.CodeStep) (any, error) { return fn(ctx, stepOf(cs)) }
}

func init() {
	// agentqtest runs an agentq.StepFunc on the engine's test step
	stepfunc.Of = func(fn any) engine.StepFunc {
		f, _ := fn.(StepFunc)
		if f == nil {
			return nil
		}
		return f.engineFunc()
	}
}

// Workflow is the workflow's id.
func (s *Step) Workflow() string { return s.s.Workflow() }

// ID is the step's id in its spec (a map instance's is its map step's).
func (s *Step) ID() string { return s.s.ID() }

// Attempt counts the step's attempts, this one included (1 on the first).
// Do not put it in a durable call's request (the determinism rule, Do).
func (s *Step) Attempt() int { return s.s.Attempt() }

// Args decodes the step's arguments (its with:, rendered) into v, as
// encoding/json does, numbers into an any as json.Number. An error names
// the step and, returned by the step, dead-letters it at once: arguments
// that do not fit are not fixed by a retry.
func (s *Step) Args(v any) error { return s.s.Args(v) }

// RawArgs is the step's arguments as JSON ("null" when it has no with:).
func (s *Step) RawArgs() json.RawMessage { return s.s.RawArgs() }

// Input is the workflow's input (numbers as json.Number, as everywhere a
// step sees a value as any).
func (s *Step) Input() map[string]any { return s.s.Input() }

// Step returns an ancestor's output: its text (Output), its parsed JSON
// (JSON: a code step's value, or a format: json answer; Decode reads
// Output into a type of yours), whether it was degraded, and Missing for
// an optional step that was dead-lettered. ok is false for a step that is
// not among this step's inputs. For a map ancestor read by the step's
// with:, Map holds its instances' outputs; Outputs reads them a page at a
// time.
func (s *Step) Step(id string) (v StepView, ok bool) { return s.s.Step(id) }

// LLM is the model, through the worker's router, with every answer kept
// durably (LLM.Chat, LLM.Stream).
func (s *Step) LLM() *LLM { return &s.llm }

// Logger logs with the workflow and step ids attached.
func (s *Step) Logger() *slog.Logger { return s.s.Logger() }

// Item decodes, in an instance of a map step (for_each), its item into v,
// as Args does. Outside a map it is an error, and so is an item that does
// not fit v; returned by the step, either dead-letters it at once (a
// programming error, or data no retry changes).
func (s *Step) Item(v any) error { return s.s.Item(v) }

// Index is, in an instance of a map step, its item's position (from 0);
// -1 outside a map.
func (s *Step) Index() int { return s.s.Index() }

// Outputs iterates over the outputs of map step id (one of this step's
// inputs) in item order, reading them from Redis a page at a time, so a
// reduce over 10,000 instances holds one page in memory. Each is a
// StepView: Output is the instance's text (Decode reads a JSON one into
// your type), JSON its parsed value, and Missing is set for an optional
// instance that was dead-lettered. A read that fails ends the iteration
// with the error (return it: the step is retried); for a step that is not
// a map among this step's inputs, the only value is an error.
//
//	for v, err := range s.Outputs(ctx, "per_region") {
//		if err != nil {
//			return nil, err
//		}
//		if v.Missing {
//			continue
//		}
//		row, err := agentq.Decode[Row](v.Output)
//		…
//	}
func (s *Step) Outputs(ctx context.Context, id string) iter.Seq2[StepView, error] {
	return s.s.Outputs(ctx, id)
}

// Items is how many instances map step id (one of this step's inputs)
// has; 0 for a step that is not a map among its inputs.
func (s *Step) Items(id string) int { return s.s.Items(id) }

// LLM is a code step's way to the model (Step.LLM): the worker's router
// (failover, keys, breakers, limits, hedging, structured output), with
// every answer kept durably, so a retried step gets the answers its
// earlier attempts had without asking again. Chat asks for a whole
// answer; Stream hands the answer's text out as it comes.
type LLM struct{ l *engine.LLM }

// Chat sends req along the named route (a route of the configuration), or
// returns the answer an earlier attempt of this step got for the same
// request at the same point (see Do for the determinism rule). Failures
// are not kept: a retried step asks again. An error passed on keeps the
// provider's class (rate_limited, server, …) and its Retry-After.
func (l *LLM) Chat(ctx context.Context, route string, req Request) (*Response, error) {
	return l.l.Chat(ctx, route, req)
}

// Stream is Chat with the answer's text streamed: onDelta (nil: none)
// gets each piece as it comes, and the workflow's event log its
// step.delta events (Client.Events followers see the text being
// written). When the stream fails over midway the text starts again (the
// log says step.stream_reset; onDelta gets the new target's text from its
// start). The answer returned, and kept durably, is the final one, whole;
// an answer an earlier attempt kept is handed to onDelta in one piece.
func (l *LLM) Stream(ctx context.Context, route string, req Request, onDelta func(delta string)) (*Response, error) {
	return l.l.Stream(ctx, route, req, onDelta)
}
