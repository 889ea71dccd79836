// Package agentq is the Go SDK of agentq: LLM agent workflows on a Redis
// task queue that keep running when LLM providers fail.
//
// A worker runs the steps of workflows. A prompt step asks a route (an
// ordered list of provider/model targets) and is handled entirely by
// agentq; a code step (run: NAME in the spec) runs a function you register
// with HandleStep, and keeps every guarantee a prompt step has: its own
// timeout, retries with backoff, checkpoints, exactly-once fan-in, and
// durable LLM calls through the same router.
//
//	cfg, err := agentq.LoadConfig("agentq.yaml")
//	w, err := agentq.NewWorker(cfg)
//	w.HandleStep("run_sql", func(ctx context.Context, s *agentq.Step) (any, error) {
//		var args struct{ Query string `json:"query"` }
//		if err := s.Args(&args); err != nil {
//			return nil, agentq.DeadLetter(err) // parked for a person
//		}
//		rows, err := agentq.Do(ctx, s, "query", func(ctx context.Context) ([]Row, error) { … })
//		return rows, err // a plain error is retried with backoff (class handler)
//	})
//	err = w.Run(ctx) // until ctx is done, then a graceful stop
//
// A producer submits workflows with a Client. Everything a worker or a
// client needs comes from a Config: Redis, providers and their keys,
// routes, retries, limits.
package agentq

import (
	"context"
	"time"

	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
)

// StepView is what a step sees of one of its ancestors (Step.Step), or of
// one instance of a map ancestor (Step.Outputs): its fields are Output
// (the text; a code step's value as JSON, which Decode reads into a type
// of yours), JSON (Output parsed, for a code step or a format: json
// answer, numbers as json.Number; nil otherwise), Degraded, Missing (an
// optional step or instance that was dead-lettered), and Map, for a map
// ancestor the step's with: reads: its Outputs (each instance's JSON
// value or text in item order, nil where missing; DecodeOutputs reads
// them), Missing (the indexes of missing instances) and Degraded.
type StepView = spec.StepView

// Spec is a parsed and checked workflow spec (Client.Parse,
// Client.StoredSpec), to submit (Client.Submit). Its fields are the
// spec's YAML (Name, Input, Steps, Defaults, Deadline, Budget,
// Concurrency, Notify, Shards). Its methods read it as a graph: Step(id)
// returns a step, Roots the steps with no dependencies, Dependents(id)
// those that depend on id directly, Finals those nothing depends on (the
// workflow's answer, Result.Final), InputKeys the input keys its
// templates read (all: the input as a whole), Needs what its steps need
// of the workers (routes, functions, tools, by queue), and LineOf the
// source line a problem's place names.
type Spec = spec.Spec

// SpecStep is one step of a Spec (Spec.Steps), as its YAML gave it: ID,
// DependsOn, Route and Prompt (a prompt step), Run and With (a code
// step), ForEach (a map step: IsMap reports it), Workflow (a child
// workflow), WaitFor (a signal), Approve, and its limits and retries.
type SpecStep = spec.Step

// Workflow is a workflow's state and steps (Client.Status, Wait, List):
// ID, Name, State (one of the State* constants), Steps (a StepRecord
// each; empty from List), Counts, Error (why it ended without
// completing), CreatedAt, FinishedAt, DeadlineAt, Generation (its
// reruns), Parent (for a child workflow), IdempotencyKey and
// CostByProvider.
type Workflow = record.Workflow

// StepRecord is one step of a Workflow: ID, State (StepDone, …),
// Output (its text; a code step's value as JSON: Decode reads it into a
// type of yours), JSON (Output parsed, for a code step or a format: json
// answer), Degraded, Error and Class (why it failed), Attempts, Target
// (the provider/model that answered), Usage and CostUSD, its times,
// ToolCalls, Child (a child workflow step's workflow), WaitsFor, and, on
// a map step, Map (its instances' counts; Client.Instances reads them).
type StepRecord = record.StepRecord

// MapCounts are a map step's instance counters (StepRecord.Map).
type MapCounts = record.MapCounts

// Counts are a workflow's step counters (Workflow.Counts).
type Counts = record.Counts

// RawJSON is JSON kept as text in a record (StepRecord.JSON, ToolCalls),
// written out as the JSON it holds.
type RawJSON = record.RawJSON

// Step states (StepRecord.State).
const (
	StepPending  = record.StepPending
	StepQueued   = record.StepQueued
	StepRunning  = record.StepRunning
	StepDone     = record.StepDone
	StepDead     = record.StepDead // dead-lettered: retries exhausted or not retryable
	StepCanceled = record.StepCanceled
	StepMapped   = record.StepMapped  // a map step whose instances run
	StepWaiting  = record.StepWaiting // an approval step waits for a person
)

// Result is a finished workflow (Workflow) and its final steps (Final,
// a StepRecord each: the steps nothing depends on, in spec order), whose
// Output is the workflow's answer (Decode reads a JSON one).
type Result = producer.Result

// Workflow states.
const (
	StatePending   = record.StatePending
	StateRunning   = record.StateRunning
	StateBlocked   = record.StateBlocked
	StateCompleted = record.StateCompleted
	StateFailed    = record.StateFailed
	StateCanceled  = record.StateCanceled
	StateWaiting   = record.StateWaiting  // an approval step waits for a person
	StateTimedOut  = record.StateTimedOut // its deadline passed
)

// Event is one entry of a workflow's event log (Client.Events): its ID
// (pass the last one read to resume), Type (one of the Event* constants),
// At, Step, Attempt, State, and what the type carries (Text of a
// step.delta, Class, Error and NextAttemptAt of a failure, Target,
// LatencyMS, tokens and CostUSD of an LLM call, …; docs/events.md lists
// them). Final reports whether it ends the log (workflow.ended).
type Event = record.Event

// Event types (docs/events.md).
const (
	EventSubmitted   = record.EventSubmitted
	EventRerun       = record.EventRerun
	EventEnded       = record.EventEnded
	EventReady       = record.EventReady
	EventStarted     = record.EventStarted
	EventFailed      = record.EventFailed
	EventWaiting     = record.EventWaiting
	EventThrottled   = record.EventThrottled
	EventDone        = record.EventDone
	EventDegraded    = record.EventDegraded
	EventDead        = record.EventDead
	EventCanceled    = record.EventCanceled
	EventLLMCall     = record.EventLLMCall
	EventToolTurn    = record.EventToolTurn
	EventDo          = record.EventDo
	EventDelta       = record.EventDelta
	EventStreamReset = record.EventStreamReset
	EventTruncated   = record.EventTruncated
)

// ErrNotFound is returned for a workflow id that does not exist or expired.
var ErrNotFound = record.ErrNotFound

// Do runs fn once per step, durably: its JSON-encoded result is kept, so
// an attempt after a failure, a crash or a lease expiry gets it back
// without running fn again. Calls are matched by the order the step makes
// them (LLM calls and Do share one sequence) and by name: a step's code
// must make the same durable calls in the same order on every attempt
// (the determinism rule); a call that differs is made again, never
// answered wrongly. Errors are not kept.
func Do[T any](ctx context.Context, s *Step, name string, fn func(ctx context.Context) (T, error)) (T, error) {
	return engine.Do(ctx, s.s, name, fn)
}

// RetryAfter asks for the step to be tried again no sooner than d. It uses
// one of the step's retries; once they are spent the step is dead-lettered.
func RetryAfter(d time.Duration, err error) error { return engine.RetryAfter(d, err) }

// DeadLetter parks the step for a person to review, with err as its
// reason, without using the retries that are left. `enqueue dlq requeue`
// runs it again.
func DeadLetter(err error) error { return engine.ToDeadLetter(err) }

// Degrade finishes the step with fallback as its output, marked degraded,
// and err kept as the reason.
func Degrade(fallback any, err error) error { return engine.Degrade(fallback, err) }
