// Package engine is what a worker runs: the task handler, each step
// kind's run side, settling an attempt and the fan-in it releases, a
// map's expansion, the reconciler, deadlines and approvals' timeouts, and
// the code step's SDK (CodeStep, LLM, tools). It shares the spec and the
// flow with the producer client and imports no part of it.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
)

// Caller is what the handler needs of the router.
type Caller interface {
	Chat(ctx context.Context, route string, req llmclient.Request) (*llmclient.Response, error)
	Route(name string) (router.Route, bool)
}

// HandlerOptions configures a Handler from the configuration (the worker
// builds them): Retention, MaxOutputBytes and MaxMapItems are taken as
// given, never filled in here; NewHandler refuses them unset.
type HandlerOptions struct {
	// Redis holds the workflows; an ended workflow's records are kept for
	// Retention from its end (retention: at least a minute).
	Redis     redis.UniversalClient
	Retention time.Duration
	// MaxOpenAge is the oldest a workflow gets open (limits.max_open_age):
	// the reconciler ends an older one timed_out; its records are kept that
	// long and Retention more. 0: the built-in default.
	MaxOpenAge time.Duration
	// Client enqueues dependents the store does not enqueue itself
	// (store.Task); it must write to the same Redis as Redis, where the
	// store enqueues the others.
	Client *asynq.Client
	Router Caller
	Logger *slog.Logger // nil: discard
	// MaxOutputBytes bounds a step's stored output (limits.max_output_bytes).
	MaxOutputBytes int
	// Retry, when set, is the worker's retry policy (the one its asynq
	// server's RetryDelayFunc uses): a failed attempt's wait is decided
	// with it when the attempt fails, and the next attempt's due time is
	// recorded with the error (status shows it). Nil: asynq decides the
	// wait alone and no due time is shown.
	Retry *RetryPolicy
	// MaxMapItems caps one map step's items on this worker, whatever the
	// submitting producer's cap (limits.max_map_items).
	MaxMapItems int
	// MaxTreeWorkflows caps the workflows under one root, the root
	// included (limits.max_tree_workflows): a child past it is not created
	// and its step is dead-lettered (class limit). 0: the default.
	MaxTreeWorkflows int
	// Events, when set, hears each settled step (metrics, demo output).
	Events func(StepEvent)
	// BeforeEnqueue, when set, is called after a step settled and before
	// the worker enqueues the dependents it made ready (the settle itself
	// enqueued them already where the store can: store.Task). Crash drills
	// use it to stop a worker at the worst moment.
	BeforeEnqueue func(wf, step string, ready []string)
	// AfterChild, when set, is called when a child workflow step created
	// its child, before its task ends (crash drills stop a worker there).
	AfterChild func(wf, step, child string)
	// Steps are the code steps this worker serves, by the name a spec's
	// run: gives.
	Steps map[string]StepFunc
	// Tools are the tools this worker runs for prompt steps, by the name
	// a spec's tools: gives.
	Tools map[string]Tool
	// MCP are the MCP servers whose tools prompt steps may offer
	// (tools: [mcp:NAME]); nil: none.
	MCP MCPServers
	// Prices, by target ("provider/model"), price each step's answer when
	// it is recorded (its cost_usd; a map's sums its instances'); nil:
	// costs unknown.
	Prices map[string]flow.Price
	// Webhooks, when set, notifies workflows that end (internal/flow/notify.go); nil: none.
	Webhooks *flow.Webhooks
	// EventLimit bounds each workflow's event log (events.limit); 0 keeps
	// no log. EventContent puts prompts and answers into its LLM call
	// events (events.content).
	EventLimit   int
	EventContent bool
	// Durability, when Replicas is set, has every settle (an answer, a
	// durable call, a decision) confirmed by that many replicas before
	// the step's task is acknowledged to asynq (redis.durability). A
	// settle not confirmed leaves the task unacknowledged: it comes back,
	// using none of the step's retries, finds the step settled and
	// confirms it then.
	Durability store.Durability
	// Worker is this worker's name in the event log (its advertisement's
	// id); empty: none is logged.
	Worker string
	// Redact removes the configuration's secrets from the text the event
	// log keeps (events.content, tool errors); nil: none to remove.
	Redact func(string) string
	// KeyLease is how long a concurrency key's slot is held without a
	// renewal (worker.key_lease); 0: DefaultKeyLease.
	KeyLease time.Duration
}

// Handler runs step tasks. It is an asynq.Handler.
type Handler struct {
	o     HandlerOptions
	st    *store.Store
	specs specCache
	// attempts is the attempt each running task began (by task id), for
	// HandleError: asynq may call it while the handler still runs.
	attempts sync.Map
	// answers keeps answers that could not be recorded (Redis away) for
	// the step's next attempt on this worker.
	answers *answerCache
	tools   map[string]*compiledTool
	// held are the concurrency slots this worker's tasks hold (keyslot.go)
	held heldSlots
	// handoffs, when set, runs the steps a settle makes ready (handoff.go)
	handoffs *Handoffs
	// mcpSchemas are the MCP tools' schemas, compiled (mcpoffer.go)
	mcpSchemas mcpSchemas
}

// NewHandler returns a Handler.
func NewHandler(o HandlerOptions) (*Handler, error) {
	if o.Redis == nil || o.Client == nil || o.Router == nil {
		return nil, errors.New("engine: handler needs Redis, an asynq client and a router")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.Retention < time.Minute:
		return nil, fmt.Errorf("engine: handler retention %s is under a minute", o.Retention)
	case o.MaxOutputBytes <= 0:
		return nil, fmt.Errorf("engine: handler max output bytes %d is not positive", o.MaxOutputBytes)
	case o.MaxMapItems <= 0:
		return nil, fmt.Errorf("engine: handler max map items %d is not positive", o.MaxMapItems)
	}
	if o.Events == nil {
		o.Events = func(StepEvent) {}
	}
	tools, err := compileTools(o.Tools)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	st := store.New(o.Redis, o.Retention, nil)
	st.SetMaxOpenAge(o.MaxOpenAge)
	st.SetLog(store.LogOptions{Limit: o.EventLimit, Worker: o.Worker})
	st.SetDurability(o.Durability)
	return &Handler{o: o, st: st, specs: newSpecCache(4096), answers: newAnswerCache(answerCacheEntries, answerCacheBytes),
		tools: tools}, nil
}
