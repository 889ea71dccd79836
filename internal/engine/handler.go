package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/codes"

	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
	"github.com/agentq/agentq/tasks"
)

// Caller is what the handler needs of the router.
type Caller interface {
	Chat(ctx context.Context, route string, req llmclient.Request) (*llmclient.Response, error)
	Route(name string) (llmclient.Route, bool)
}

// HandlerOptions configures a Handler.
type HandlerOptions struct {
	// Redis holds the workflows; records written are kept for Retention
	// (at least a minute).
	Redis     redis.UniversalClient
	Retention time.Duration
	// Client enqueues dependents the store does not enqueue itself
	// (store.Task); it must write to the same Redis as Redis, where the
	// store enqueues the others.
	Client *asynq.Client
	Router Caller
	Logger *slog.Logger // nil: discard
	// MaxOutputBytes bounds a step's stored output; 0 means 1 MiB.
	MaxOutputBytes int
	// Retry, when set, is the worker's retry policy (the one its asynq
	// server's RetryDelayFunc uses): a failed attempt's wait is decided
	// with it when the attempt fails, and the next attempt's due time is
	// recorded with the error (status shows it). Nil: asynq decides the
	// wait alone and no due time is shown.
	Retry *RetryPolicy
	// MaxMapItems caps one map step's items on this worker, whatever the
	// submitting producer's cap (limits.max_map_items); 0: the default.
	MaxMapItems int
	// Events, when set, hears each settled step (metrics, demo output).
	Events func(StepEvent)
	// BeforeEnqueue, when set, is called after a step settled and before
	// the worker enqueues the dependents it made ready (the settle itself
	// enqueued them already where the store can: store.Task). Crash drills
	// use it to stop a worker at the worst moment.
	BeforeEnqueue func(wf, step string, ready []string)
	// Steps are the code steps this worker serves, by the name a spec's
	// run: gives.
	Steps map[string]StepFunc
	// Tools are the tools this worker runs for prompt steps, by the name
	// a spec's tools: gives.
	Tools map[string]Tool
	// Prices, by target ("provider/model"), price each step's answer when
	// it is recorded (its cost_usd; a map's sums its instances'); nil:
	// costs unknown.
	Prices map[string]Price
	// Webhooks, when set, notifies workflows that end (notify.go); nil: none.
	Webhooks *Webhooks
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
}

// NewHandler returns a Handler.
func NewHandler(o HandlerOptions) (*Handler, error) {
	if o.Redis == nil || o.Client == nil || o.Router == nil {
		return nil, errors.New("engine: handler needs Redis, an asynq client and a router")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = 1 << 20
	}
	if o.MaxMapItems <= 0 {
		o.MaxMapItems = DefaultMaxMapItems
	}
	if o.Events == nil {
		o.Events = func(StepEvent) {}
	}
	tools, err := compileTools(o.Tools)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	return &Handler{o: o, st: store.New(o.Redis, o.Retention, nil), specs: specCache{max: 4096}, answers: newAnswerCache(answerCacheEntries, answerCacheBytes),
		tools: tools}, nil
}

// ProcessTask implements asynq.Handler.
func (h *Handler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	switch t.Type() {
	case tasks.TypeDeadline:
		return h.deadline(ctx, t)
	case tasks.TypeApprovalTimeout:
		return h.approvalTimeout(ctx, t)
	case tasks.TypeDecided:
		return h.decided(ctx, t)
	}
	p, err := tasks.DecodePayload(t.Payload())
	if err != nil {
		h.o.Logger.Error("step task dead-lettered: bad payload", "err", store.Excerpt(err.Error()))
		return fmt.Errorf("%v: %w", err, asynq.SkipRetry)
	}
	log := stepLogger(h.o.Logger, p.Workflow, p.Step)
	spec, err := h.specs.get(ctx, h.st, p.Workflow)
	if errors.Is(err, store.ErrNotFound) {
		return h.unknownWorkflow(log, p)
	}
	if err != nil {
		return err
	}
	st, inst, ok := stepOf(spec, p.Step)
	if !ok {
		log.Error("step task dead-lettered: the workflow has no such step")
		return fmt.Errorf("workflow %s has no step %q: %w", logID(p.Workflow), logID(p.Step), asynq.SkipRetry)
	}
	r := spec.resolve(st)
	taskID, _ := asynq.GetTaskID(ctx)
	var a *store.Attempt
	bctx, bcancel := context.WithTimeout(ctx, settleTimeout)
	err = untilStored(bctx, func() (err error) { // the same owner may take its own lease again
		a, err = h.st.Begin(bctx, p.Workflow, p.Step, taskID, p.Gen, r.Timeout+settleTimeout, inputsOf(st, inst))
		return err
	})
	bcancel()
	var busy *store.BusyError
	if errors.As(err, &busy) {
		// a duplicate delivery while another task runs the step: look again
		// soon (the checkpoint will answer once the step is done); this is
		// not a failure and uses no retry
		log.Info("step busy under another task; looking again shortly", "until", busy.Until)
		return &StepError{Class: classBusy, RetryAfter: min(time.Until(busy.Until), busyRecheck), Err: err}
	}
	if errors.Is(err, store.ErrNotFound) {
		return h.unknownWorkflow(log, p)
	}
	if errors.Is(err, store.ErrOtherRun) {
		log.Info("step task of another run of the workflow (it was rerun): nothing to do", "err", err)
		return nil
	}
	if errors.Is(err, store.ErrOldLayout) {
		// kept in the dead-letter queue, not dropped: requeue it once a
		// worker of the version that wrote it runs
		log.Error("step task dead-lettered", "err", err)
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	if err != nil {
		return err
	}
	if a.WorkflowState == store.StateCanceled || a.WorkflowState == store.StateTimedOut || a.WorkflowState == store.StateFailed {
		log.Info("step skipped: workflow " + a.WorkflowState)
		return nil
	}
	if pastDeadline(a.DeadlineAt) {
		log.Info("step not started: the workflow's deadline passed")
		return h.timeOut(ctx, p.Workflow, spec)
	}
	ctx = withBudget(ctx, p.Workflow, spec)
	if a.DeadlineAt != nil { // the attempt ends at the workflow's deadline, if that comes first
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, *a.DeadlineAt)
		defer cancel()
	}
	if inst != nil {
		if inst.item, err = decodeItem(a.Item); err != nil {
			log.Error("step task dead-lettered", "err", err)
			return fmt.Errorf("%s: %w: %w", logID(p.Step), err, asynq.SkipRetry)
		}
	}
	h.attempts.Store(taskID, a.Step.Attempts)
	ctx, span := stepContext(ctx, p, r.Route, a.Step.Attempts)
	defer span.End()
	err = h.process(ctx, stepRun{p: p, spec: spec, st: st, r: r, attempt: a.Step.Attempts, inst: inst, log: log, deadline: a.DeadlineAt}, a)
	if err != nil && endsWithDeadline(ctx, a.DeadlineAt) {
		return h.timeOut(ctx, p.Workflow, spec) // not retried: the workflow is over
	}
	if err != nil && classOf(err) == retry.Canceled && h.workflowStopped(ctx, p.Workflow) {
		log.Info("step stopped: its workflow was canceled or timed out")
		err = nil // not retried: nothing of the workflow runs any more
	}
	if err != nil {
		span.SetStatus(codes.Error, store.Excerpt(err.Error()))
	} else {
		h.attempts.CompareAndDelete(taskID, a.Step.Attempts) // HandleError is not called on success
	}
	return err
}

// unknownWorkflow dead-letters a step task whose workflow does not exist
// (it expired, was never written, or the payload names another
// deployment's): archived with the reason, never silently completed.
func (h *Handler) unknownWorkflow(log *slog.Logger, p tasks.Payload) error {
	log.Error("step task dead-lettered: workflow not found (expired or never written)")
	return fmt.Errorf("workflow %s not found (expired or never written): %w", logID(p.Workflow), asynq.SkipRetry)
}

// process runs one attempt of a step that Begin let through.
func (h *Handler) process(ctx context.Context, run stepRun, a *store.Attempt) error {
	p, spec, st, r := run.p, run.spec, run.st, run.r
	log := run.log
	views := make(map[string]StepView, len(a.Deps))
	for id, d := range a.Deps {
		views[id] = viewOf(spec, id, d.Output, d.Degraded, d.State != store.StepDone)
	}
	if err := h.loadMapViews(ctx, run, a, views); err != nil {
		if ctx.Err() != nil {
			return &StepError{Class: retry.Canceled, Err: ctx.Err()}
		} else if errors.Is(err, errMapViewTooLarge) {
			return h.deadLetter(ctx, run, retry.BadRequest, err)
		}
		return err // Redis did not answer: retried
	}
	if st.IsMap() && run.inst == nil {
		return h.expand(ctx, run, a, views)
	}
	if st.Approve != nil {
		if a.Step.State == store.StepWaiting || a.Step.State == store.StepDone {
			return nil // parked already (a redelivery), or decided
		}
		return h.park(ctx, run, views)
	}
	if st.Run != "" {
		return h.runCode(ctx, run, a, views)
	}
	data := dataOf(spec.Input, views, run.inst)
	system, err := renderData(ctx, st.systemT, data)
	var prompt string
	if err == nil {
		prompt, err = renderData(ctx, st.promptT, data)
	}
	if err != nil {
		if ctx.Err() != nil {
			return &StepError{Class: retry.Canceled, Err: ctx.Err()} // stopped, not a bad template
		}
		return h.deadLetter(ctx, run, retry.BadRequest, err)
	}
	if _, ok := h.o.Router.Route(r.Route); !ok {
		return h.deadLetter(ctx, run, retry.BadRequest, fmt.Errorf("route %q is not configured on this worker", r.Route))
	}
	hash := inputHash(r.Route, system, prompt)
	if a.Step.State == store.StepDone && a.Step.InputHash == hash {
		// checkpoint: a redelivery of a finished step does not call the LLM again
		log.Info("step checkpoint hit: not calling the LLM again")
		return h.settle(ctx, run, store.Outcome{Done: true, Output: a.Step.Output, ToolCalls: string(a.Step.ToolCalls), Degraded: a.Step.Degraded,
			Target: a.Step.Target, Usage: a.Step.Usage, InputHash: hash, Optional: st.Optional, Attempt: a.Step.Attempts}, "")
	}
	key := answerKey{wf: p.Workflow, step: p.Step, gen: p.Gen, hash: hash}
	if o, ok := h.answers.get(key); ok {
		// an earlier attempt's answer this worker could not record: the
		// provider is not called again for it
		log.Info("recording an answer kept in memory from an earlier attempt", "attempt", a.Step.Attempts)
		o.Attempt = a.Step.Attempts
		return h.recordAnswer(ctx, run, key, o)
	}
	if st.runsTools(h.tools) {
		return h.runTools(ctx, run, a, key, system, prompt)
	}
	// an answer over the output limit is never cut to fit: the router
	// moves on to the next target (output_too_large), then dead-letters
	req := llmclient.Request{System: system, Messages: []llmclient.Message{{Role: "user", Content: prompt}}, MaxTokens: st.MaxTokens,
		Temperature: st.Temperature, Tools: st.toolsRequest(nil), Output: st.outputRequest(), MaxOutputBytes: h.o.MaxOutputBytes}
	callCtx, cancel := withSettleMargin(ctx)
	resp, err := h.o.Router.Chat(callCtx, r.Route, req)
	cancel()
	if err != nil {
		return h.failed(ctx, run, err, hash)
	}
	out := resp.Text
	var calls string
	if len(resp.ToolCalls) > 0 {
		b, _ := json.Marshal(resp.ToolCalls)
		calls = string(b)
	}
	return h.recordAnswer(ctx, run, key, store.Outcome{Done: true, Optional: st.Optional, Output: out, ToolCalls: calls,
		Target: resp.Provider + "/" + resp.Model, InputHash: hash, Attempt: a.Step.Attempts,
		Usage: store.Usage{PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens}})
}
