package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// promptRun runs a prompt step: one model call per attempt.
type promptRun struct{}

func (promptRun) run(ctx context.Context, h *Handler, run stepRun, a *store.Attempt, views map[string]spec.StepView) error {
	return h.runPrompt(ctx, run, a, views, h.askOnce)
}

// asker asks the model for a prompt step's answer and records it: one
// call (askOnce), or the tool loop.
type asker func(ctx context.Context, run stepRun, a *store.Attempt, key answerKey, system, prompt string) error

// runPrompt runs one attempt of a prompt step: its templates rendered,
// then its checkpoint or an answer kept from an earlier attempt, else
// ask.
func (h *Handler) runPrompt(ctx context.Context, run stepRun, a *store.Attempt, views map[string]spec.StepView, ask asker) error {
	p, wspec, st, r := run.p, run.spec, run.st, run.r
	log := run.log
	data := spec.DataOf(wspec.Input, views, run.inst)
	system, err := spec.RenderData(ctx, spec.SystemTemplate(st), data)
	var prompt string
	if err == nil {
		prompt, err = spec.RenderData(ctx, spec.PromptTemplate(st), data)
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
	hash := spec.InputHash(r.Route, system, prompt)
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
	return ask(ctx, run, a, key, system, prompt)
}

// askOnce asks the model once and records its answer.
func (h *Handler) askOnce(ctx context.Context, run stepRun, a *store.Attempt, key answerKey, system, prompt string) error {
	st, r := run.st, run.r
	// an answer over the output limit is never cut to fit: the router
	// moves on to the next target (output_too_large), then dead-letters
	req := llmclient.Request{System: system, Messages: []llmclient.Message{{Role: "user", Content: prompt}}, MaxTokens: st.MaxTokens,
		Temperature: st.Temperature, Tools: toolsRequest(st, nil), Output: spec.OutputRequest(st), MaxOutputBytes: h.o.MaxOutputBytes}
	callCtx, cancel := withSettleMargin(ctx)
	var (
		resp *llmclient.Response
		err  error
	)
	if st.Stream {
		resp, err = streamChat(callCtx, h.o.Router, r.Route, req, nil)
	} else {
		resp, err = h.o.Router.Chat(callCtx, r.Route, req)
	}
	cancel()
	if err != nil {
		return h.failed(ctx, run, err, key.hash)
	}
	out := resp.Text
	var calls string
	if len(resp.ToolCalls) > 0 {
		b, _ := json.Marshal(resp.ToolCalls)
		calls = string(b)
	}
	return h.recordAnswer(ctx, run, key, store.Outcome{Done: true, Optional: st.Optional, Output: out, ToolCalls: calls,
		Target: resp.Provider + "/" + resp.Model, InputHash: key.hash, Attempt: a.Step.Attempts,
		Usage: store.Usage{PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens}})
}
