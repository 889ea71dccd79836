package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// runTools runs one attempt of a prompt step whose tools this worker runs:
// the conversation of toolLoop, then the model's text answer settles the
// step like any prompt step's (its output checks included), with every
// call and result in its tool_calls.
func (h *Handler) runTools(ctx context.Context, run *stepRun, a *store.Attempt, key answerKey, system, prompt string) error {
	p, st, r := run.p, run.st, run.r
	log := run.log
	attempt := a.Step.Attempts
	if err := missingTool(st, h.tools, h.o.MCP); err != nil {
		return h.toolsNotServed(ctx, run, a, err)
	}
	calls, err := h.storedCalls(ctx, p, attempt)
	if err != nil {
		return err
	}
	callCtx, cancel := withSettleMargin(ctx)
	defer cancel()
	// the tools the model is offered: an MCP server's are listed by it
	tools, offered, err := h.offer(callCtx, st, log)
	if err != nil {
		cancel()
		return h.failed(ctx, run, err, key.hash)
	}
	d := &durable{wf: p.Workflow, step: p.Step, gen: p.Gen, attempt: attempt, st: h.st, log: log, stored: calls, prices: h.o.Prices}
	l := &toolLoop{d: d, router: h.o.Router, route: r.Route, log: log, tools: offered, maxTurns: spec.MaxTurns(st), maxBytes: h.o.MaxOutputBytes, stream: st.Stream,
		mcp: h.o.MCP, redact: h.redact,
		base: llmclient.Request{System: system, MaxTokens: st.MaxTokens, Temperature: st.Temperature,
			Tools: tools, Output: spec.OutputRequest(st), MaxOutputBytes: h.o.MaxOutputBytes}}
	resp, err := l.run(callCtx, prompt)
	cancel()
	log.Info("tool conversation", "turns", l.turns, "replayed", d.replayed, "made", d.made, "attempt", attempt)
	var fatal *fatalToolError
	var over *maxTurnsError
	var unsettled *unsettledCall
	if errors.As(err, &fatal) || errors.As(err, &over) || errors.As(err, &unsettled) {
		log.Warn("tool conversation ends the step", "tool_calls", store.Excerpt(l.recordJSON()))
	}
	switch {
	case errors.As(err, &fatal), errors.As(err, &unsettled):
		return h.deadLetter(ctx, run, retry.Handler, err)
	case errors.As(err, &over):
		return h.deadLetter(ctx, run, retry.BadRequest, err)
	case errors.Is(err, store.ErrStaleAttempt):
		return h.stale(p, attempt, err)
	case errors.Is(err, store.ErrNotFound):
		log.Info("tool conversation stopped: the workflow is gone")
		return nil
	case err != nil:
		return h.failed(ctx, run, err, key.hash)
	}
	usage, cost := d.spent()
	return h.recordAnswer(ctx, run, key, store.Outcome{Done: true, Optional: st.Optional, Output: resp.Text, ToolCalls: l.recordJSON(),
		Target: resp.Provider + "/" + resp.Model, InputHash: key.hash, Attempt: attempt, Usage: usage, CostMicros: cost})
}

// toolsNotServed hands a step that names a tool this worker lacks back to
// the queue for a worker that has it, as a code step without its function
// is; one that no worker took after many offers is dead-lettered.
func (h *Handler) toolsNotServed(ctx context.Context, run *stepRun, a *store.Attempt, err error) error {
	p := run.p
	maxRetry := deliveryOf(ctx).maxRetry
	if a.Step.Attempts > 3*(maxRetry+1) {
		return h.deadLetter(ctx, run, retry.BadRequest, fmt.Errorf("%w, and no worker took the step after %d offers", err, a.Step.Attempts))
	}
	h.o.Logger.Warn("step handed back: this worker does not have its tool", "wf", p.Workflow, "step", p.Step, "attempt", a.Step.Attempts, "err", err)
	return &StepError{Class: retry.NotServed, RetryAfter: notServedRecheck, Err: err}
}

// toolLoopRun runs a step with tools: the tool loop, or one call when
// none of its tools is the worker's own.
type toolLoopRun struct{}

func (toolLoopRun) servedBy(h *Handler, st *spec.Step) bool {
	return missingTool(st, h.tools, h.o.MCP) == nil
}

func (toolLoopRun) run(ctx context.Context, h *Handler, run *stepRun, a *store.Attempt, views map[string]spec.StepView) error {
	return h.runPrompt(ctx, run, a, views, func(ctx context.Context, run *stepRun, a *store.Attempt, key answerKey, system, prompt string) error {
		if runsTools(run.st, h.tools) {
			return h.runTools(ctx, run, a, key, system, prompt)
		}
		return h.askOnce(ctx, run, a, key, system, prompt)
	})
}
