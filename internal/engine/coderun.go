package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"runtime/debug"
	"time"

	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/retry"
	"github.com/agentq/agentq/tasks"
)

// notServedRecheck is how soon a step no worker here serves is offered again.
const notServedRecheck = 5 * time.Second

// runCode runs one attempt of a code step that Begin let through.
func (h *Handler) runCode(ctx context.Context, run *stepRun, a *store.Attempt, views map[string]spec.StepView) error {
	p, wspec, st := run.p, run.spec, run.st
	log := run.log.With("handler", st.Run)
	fn, ok := h.o.Steps[st.Run]
	if !ok {
		maxRetry := deliveryOf(ctx).maxRetry
		err := fmt.Errorf("no function %q is registered on this worker", st.Run)
		if a.Step.Attempts > 3*(maxRetry+1) {
			return h.deadLetter(ctx, run, retry.BadRequest, fmt.Errorf("%w, and no worker took the step after %d offers", err, a.Step.Attempts))
		}
		log.Warn("code step handed back: this worker does not serve it", "attempt", a.Step.Attempts)
		return &StepError{Class: retry.NotServed, RetryAfter: notServedRecheck, Err: err}
	}
	args, err := spec.RenderWith(ctx, st, spec.DataOf(wspec.Input, views, run.inst))
	if err != nil {
		if ctx.Err() != nil {
			return &StepError{Class: retry.Canceled, Err: ctx.Err()}
		}
		return h.deadLetter(ctx, run, retry.BadRequest, err)
	}
	hash := spec.InputHash("run:"+st.Run, string(args), "")
	if a.Step.State == store.StepDone && a.Step.InputHash == hash {
		log.Info("step checkpoint hit: not running the step's code again")
		return h.settle(ctx, run, store.Outcome{Done: true, Output: a.Step.Output, Degraded: a.Step.Degraded,
			Target: a.Step.Target, Usage: a.Step.Usage, InputHash: hash, Optional: st.Optional, Attempt: a.Step.Attempts}, "")
	}
	calls, err := h.storedCalls(ctx, p, a.Step.Attempts)
	if err != nil {
		return err
	}
	d := &durable{wf: p.Workflow, step: p.Step, gen: p.Gen, attempt: a.Step.Attempts, st: h.st, log: log, stored: calls, prices: h.o.Prices}
	cs := &CodeStep{workflow: p.Workflow, id: p.Step, attempt: a.Step.Attempts, args: args, input: wspec.Input,
		steps: views, log: log, d: d, llm: &LLM{d: d, router: h.o.Router}, inst: run.inst,
		maps: map[string]mapSource{}}
	for id, dep := range a.Deps {
		n := 0 // a map that never expanded (dead-lettered, optional) has no outputs
		if dep.Map != nil {
			n = dep.Map.Items
		} else if st, ok := wspec.Step(id); !ok || !st.IsMap() {
			continue
		}
		cs.maps[id] = mapSource{items: n, pages: func(ctx context.Context) iter.Seq2[spec.StepView, error] {
			return mapPages(ctx, h.st, p.Workflow, wspec, id, n)
		}}
	}
	callCtx, cancel := withSettleMargin(ctx)
	out, err := callStep(callCtx, fn, cs)
	cancel()
	target := "code:" + st.Run
	usage, cost := d.spent()
	if d.replayed > 0 || d.made > 0 {
		log.Info("code step's durable calls", "replayed", d.replayed, "made", d.made)
	}
	if err != nil {
		return h.codeFailed(ctx, run, err, hash, target)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return h.deadLetter(ctx, run, retry.Handler, fmt.Errorf("the step's value cannot be stored as JSON: %w", err))
	}
	if len(b) > h.o.MaxOutputBytes {
		return h.deadLetter(ctx, run, retry.Handler, fmt.Errorf("the step's value is %d bytes of JSON, over the %d-byte output limit", len(b), h.o.MaxOutputBytes))
	}
	return h.settle(ctx, run, store.Outcome{Done: true, Optional: st.Optional, Output: string(b), Target: target,
		InputHash: hash, Attempt: a.Step.Attempts, Usage: usage, CostMicros: cost}, "")
}

// callStep runs fn, turning a panic into a *PanicError (with its stack)
// and a plain error into class handler.
func callStep(ctx context.Context, fn StepFunc, s *CodeStep) (out any, err error) {
	defer func() {
		if v := recover(); v != nil {
			out, err = nil, &handlerError{err: &PanicError{Value: v, Stack: debug.Stack()}}
		}
	}()
	out, err = fn(ctx, s)
	if err == nil {
		return out, nil
	}
	if _, ok := asVerdict(err); ok {
		return nil, err
	}
	var c interface{ Class() retry.Class }
	if errors.As(err, &c) && !c.Class().Rule().Free && (c.Class() != retry.Canceled || ctx.Err() != nil) {
		// a provider's failure the step passed on keeps its class; the
		// worker's own free classes are not the step's to claim (a step
		// that said busy would retry for ever), nor is canceled while the
		// step's own context runs (a sub-context it canceled itself)
		return nil, err
	}
	return nil, &handlerError{err: err}
}

// codeFailed decides what a failed code step becomes, as failed does for a
// prompt step, honouring the step's own verdict.
func (h *Handler) codeFailed(ctx context.Context, run *stepRun, err error, hash, target string) error {
	p, st, attempt := run.p, run.st, run.attempt
	var pe *PanicError
	if errors.As(err, &pe) {
		h.o.Logger.Error("code step panicked", "wf", p.Workflow, "step", p.Step, "handler", st.Run, "attempt", attempt,
			"panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
	}
	v, ok := asVerdict(err)
	if !ok {
		return h.failed(ctx, run, err, hash)
	}
	switch v.verdict {
	case verdictDeadLetter:
		return h.deadLetter(ctx, run, retry.Handler, err)
	case verdictDegrade:
		b, jerr := json.Marshal(v.fallback)
		if jerr != nil {
			return h.deadLetter(ctx, run, retry.Handler, fmt.Errorf("the degraded value cannot be stored as JSON: %w", jerr))
		}
		return h.settle(ctx, run, store.Outcome{Done: true, Optional: st.Optional, Output: string(b), Degraded: true,
			Target: target, InputHash: hash, Error: store.Excerpt(err.Error()), Attempt: attempt}, retry.Handler)
	}
	return h.failed(ctx, run, &handlerError{err: err}, hash) // it waits v.after at least
}

// storedCalls loads the durable calls earlier attempts of the step stored;
// a first attempt has none to find (Begin counts every attempt), so it
// reads nothing.
func (h *Handler) storedCalls(ctx context.Context, p tasks.Payload, attempt int) (map[int]store.Call, error) {
	if attempt <= 1 {
		return nil, nil
	}
	var calls map[int]store.Call
	if err := untilStored(ctx, func() (err error) {
		calls, err = h.st.Calls(ctx, p.Workflow, p.Step)
		return err
	}); err != nil {
		return nil, fmt.Errorf("load durable calls: %w", err)
	}
	return calls, nil
}

// codeRun runs a code step: its worker's function.
type codeRun struct{}

func (codeRun) servedBy(h *Handler, st *spec.Step) bool {
	_, ok := h.o.Steps[st.Run]
	return ok
}

func (codeRun) run(ctx context.Context, h *Handler, run *stepRun, a *store.Attempt, views map[string]spec.StepView) error {
	return h.runCode(ctx, run, a, views)
}
