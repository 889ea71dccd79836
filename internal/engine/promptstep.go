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

func (promptRun) run(ctx context.Context, h *Handler, run *stepRun, a *store.Attempt, views map[string]spec.StepView) error {
	return h.runPrompt(ctx, run, a, views, h.askOnce)
}

// asker asks the model for a prompt step's answer and records it: one
// call (askOnce), or the tool loop.
type asker func(ctx context.Context, run *stepRun, a *store.Attempt, key answerKey, system, prompt string) error

// runPrompt runs one attempt of a prompt step: its templates rendered,
// then its checkpoint or an answer kept from an earlier attempt, else
// ask. (ask waits on the model: what comes before it is done in
// preparePrompt, whose frame is gone while it waits; handler.go says
// why.)
func (h *Handler) runPrompt(ctx context.Context, run *stepRun, a *store.Attempt, views map[string]spec.StepView, ask asker) error {
	c, err := h.preparePrompt(ctx, run, a, views)
	if c == nil {
		return err
	}
	return ask(ctx, run, a, c.key, c.system, c.prompt)
}

// promptCall is what a prompt step's attempt asks.
type promptCall struct {
	key            answerKey
	system, prompt string
}

// preparePrompt renders a prompt step's templates: what to ask, or nil
// and the attempt's end when it needs no call (its checkpoint, an answer
// kept from an earlier attempt, a bad template or route).
//
//go:noinline
func (h *Handler) preparePrompt(ctx context.Context, run *stepRun, a *store.Attempt, views map[string]spec.StepView) (*promptCall, error) {
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
			return nil, &StepError{Class: retry.Canceled, Err: ctx.Err()} // stopped, not a bad template
		}
		return nil, h.deadLetter(ctx, run, retry.BadRequest, err)
	}
	if _, ok := h.o.Router.Route(r.Route); !ok {
		return nil, h.deadLetter(ctx, run, retry.BadRequest, fmt.Errorf("route %q is not configured on this worker", r.Route))
	}
	hash := spec.InputHash(r.Route, system, prompt)
	if a.Step.State == store.StepDone && a.Step.InputHash == hash {
		// checkpoint: a redelivery of a finished step does not call the LLM again
		log.Info("step checkpoint hit: not calling the LLM again")
		return nil, h.settle(ctx, run, store.Outcome{Done: true, Output: a.Step.Output, ToolCalls: string(a.Step.ToolCalls), Degraded: a.Step.Degraded,
			Target: a.Step.Target, Usage: a.Step.Usage, InputHash: hash, Optional: st.Optional, Attempt: a.Step.Attempts}, "")
	}
	key := answerKey{wf: p.Workflow, step: p.Step, gen: p.Gen, hash: hash}
	if o, ok := h.answers.get(key); ok {
		// an earlier attempt's answer this worker could not record: the
		// provider is not called again for it
		log.Info("recording an answer kept in memory from an earlier attempt", "attempt", a.Step.Attempts)
		o.Attempt = a.Step.Attempts
		return nil, h.recordAnswer(ctx, run, key, o)
	}
	return &promptCall{key: key, system: system, prompt: prompt}, nil
}

// askOnce asks the model once and records its answer.
func (h *Handler) askOnce(ctx context.Context, run *stepRun, a *store.Attempt, key answerKey, system, prompt string) error {
	req := h.promptRequest(run.st, system, prompt)
	callCtx, cancel := withSettleMargin(ctx)
	var (
		resp *llmclient.Response
		err  error
	)
	if run.st.Stream {
		resp, err = streamChat(callCtx, h.o.Router, run.r.Route, *req, nil)
	} else {
		resp, err = h.o.Router.Chat(callCtx, run.r.Route, *req)
	}
	cancel()
	return h.answered(ctx, run, a, &key, resp, err)
}

// promptRequest is the request of prompt step st. An answer over the
// output limit is never cut to fit: the router moves on to the next
// target (output_too_large), then dead-letters.
//
//go:noinline
func (h *Handler) promptRequest(st *spec.Step, system, prompt string) *llmclient.Request {
	return &llmclient.Request{System: system, Messages: []llmclient.Message{{Role: "user", Content: prompt}}, MaxTokens: st.MaxTokens,
		Temperature: st.Temperature, Tools: toolsRequest(st, nil), Output: spec.OutputRequest(st), MaxOutputBytes: h.o.MaxOutputBytes}
}

// answered records a call's answer, or its failure.
//
//go:noinline
func (h *Handler) answered(ctx context.Context, run *stepRun, a *store.Attempt, key *answerKey, resp *llmclient.Response, err error) error {
	if err != nil {
		return h.failed(ctx, run, err, key.hash)
	}
	var calls string
	if len(resp.ToolCalls) > 0 {
		b, _ := json.Marshal(resp.ToolCalls)
		calls = string(b)
	}
	return h.recordAnswer(ctx, run, *key, store.Outcome{Done: true, Optional: run.st.Optional, Output: resp.Text, ToolCalls: calls,
		Target: resp.Provider + "/" + resp.Model, InputHash: key.hash, Attempt: a.Step.Attempts,
		Usage: store.Usage{PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens}})
}
