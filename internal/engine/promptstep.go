package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// promptKind is a step that asks its route (prompt:, system:): one model
// call per attempt. A prompt step that offers tools is toolLoopKind.
type promptKind struct{ oneTask }

func (promptKind) claims(*Step) bool { return true }

func (promptKind) check(s *Spec, st *Step, where string, _ Limits, bad problemFunc) {
	checkPrompt(s, st, where, bad)
}

// promptFields are the fields every prompt step takes.
var promptFields = []string{"route", "system", "prompt", "degrade", "max_tokens", "temperature", "output", "timeout"}

func (promptKind) takes(*Step) ([]string, string) { return promptFields, "a prompt step without tools" }

// checkPrompt checks the fields every prompt step has.
func checkPrompt(s *Spec, st *Step, where string, bad problemFunc) {
	if st.Route == "" && s.Defaults.Route == "" {
		bad(st.line, where+".route", "is empty and defaults.route is not set")
	}
	if strings.TrimSpace(st.Prompt) == "" {
		bad(st.line, where+".prompt", "is empty (a step has a prompt, or run: a function)")
	}
}

func (promptKind) prepare(*Step) error { return nil }

func (promptKind) need(_ *Step, r resolved) (string, string) { return "route", r.Route }

func (promptKind) jsonOutput(st *Step) bool { return st.Output != nil && st.Output.Format == "json" }

func (promptKind) run(ctx context.Context, h *Handler, run stepRun, a *store.Attempt, views map[string]StepView) error {
	return h.runPrompt(ctx, run, a, views, h.askOnce)
}

func (promptKind) input(ctx context.Context, st *Step, data promptData) (system, prompt string) {
	var err error
	if system, err = renderData(ctx, st.systemT, data); err != nil {
		system = "(cannot render: " + err.Error() + ")"
	}
	if prompt, err = renderData(ctx, st.promptT, data); err != nil {
		prompt = "(cannot render: " + err.Error() + ")"
	}
	return system, prompt
}

// asker asks the model for a prompt step's answer and records it: one
// call (askOnce), or the tool loop.
type asker func(ctx context.Context, run stepRun, a *store.Attempt, key answerKey, system, prompt string) error

// runPrompt runs one attempt of a prompt step: its templates rendered,
// then its checkpoint or an answer kept from an earlier attempt, else
// ask.
func (h *Handler) runPrompt(ctx context.Context, run stepRun, a *store.Attempt, views map[string]StepView, ask asker) error {
	p, spec, st, r := run.p, run.spec, run.st, run.r
	log := run.log
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
	return ask(ctx, run, a, key, system, prompt)
}

// askOnce asks the model once and records its answer.
func (h *Handler) askOnce(ctx context.Context, run stepRun, a *store.Attempt, key answerKey, system, prompt string) error {
	st, r := run.st, run.r
	// an answer over the output limit is never cut to fit: the router
	// moves on to the next target (output_too_large), then dead-letters
	req := llmclient.Request{System: system, Messages: []llmclient.Message{{Role: "user", Content: prompt}}, MaxTokens: st.MaxTokens,
		Temperature: st.Temperature, Tools: st.toolsRequest(nil), Output: st.outputRequest(), MaxOutputBytes: h.o.MaxOutputBytes}
	callCtx, cancel := withSettleMargin(ctx)
	resp, err := h.o.Router.Chat(callCtx, r.Route, req)
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
