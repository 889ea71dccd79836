package engine

import (
	"context"
	"strings"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// stepLog logs what one attempt of a step does besides changing its state
// (its LLM calls, tool turns, durable calls) to its workflow's event log.
// The state changes are logged by the store, with the change. A nil
// stepLog (no log, or a step run by a test) logs nothing.
type stepLog struct {
	h       *Handler
	wf      string
	step    string
	attempt int
}

type stepLogKey struct{}

// withStepLog returns ctx carrying the attempt's log and hearing the
// router's calls under it, when the worker keeps an event log.
func (h *Handler) withStepLog(ctx context.Context, run stepRun) context.Context {
	l := &stepLog{h: h, wf: run.p.Workflow, step: run.p.Step, attempt: run.attempt}
	ctx = context.WithValue(ctx, stepLogKey{}, l)
	return router.WithCallHook(ctx, func(c router.CallReport) { l.call(ctx, c) })
}

func stepLogOf(ctx context.Context) *stepLog {
	l, _ := ctx.Value(stepLogKey{}).(*stepLog)
	return l
}

// log appends events, waiting for Redis no longer than a settle: an event
// that cannot be written is noted in the worker's log and dropped (the
// state changes it accompanies are logged by the store, atomically).
func (l *stepLog) log(ctx context.Context, evs ...store.Event) {
	if l == nil || l.h.o.EventLimit <= 0 {
		return
	}
	l.write(ctx, evs[0].Type, func(ctx context.Context) error { return l.h.st.Log(ctx, l.wf, l.own(evs)...) })
}

func (l *stepLog) own(evs []store.Event) []store.Event {
	for i := range evs {
		evs[i].Step, evs[i].Attempt = l.step, l.attempt
	}
	return evs
}

func (l *stepLog) write(ctx context.Context, typ string, w func(context.Context) error) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if err := w(lctx); err != nil {
		l.h.o.Logger.Warn("event not logged", "wf", l.wf, "step", l.step, "type", typ, "err", store.Excerpt(err.Error()))
	}
}

// call logs one LLM call: who answered, with which key (its fingerprint),
// how long it took, its tokens and cost, and its class when it failed;
// with events.content its messages and answer, redacted.
func (l *stepLog) call(ctx context.Context, c router.CallReport) {
	target := c.Target.Provider.Name() + "/" + c.Target.Model
	e := store.Event{Type: record.EventLLMCall, Route: c.Route, Target: target, Provider: c.Target.Provider.Name(), Key: c.Key,
		LatencyMS: c.Latency.Milliseconds(), PromptTokens: c.Usage.PromptTokens, CompletionTokens: c.Usage.CompletionTokens}
	if c.Class != retry.OK {
		e.Class = string(c.Class)
	}
	micros := costMicros(l.h.o.Prices, target, c.Usage.PromptTokens, c.Usage.CompletionTokens)
	e.CostUSD = float64(micros) / 1e6
	if l.h.o.EventContent {
		e.Prompt = l.h.redact(promptText(c.Request))
		if c.Response != nil {
			e.Answer = l.h.redact(c.Response.Text)
		}
	}
	if micros <= 0 && l.h.o.EventLimit <= 0 {
		return
	}
	l.write(ctx, e.Type, func(ctx context.Context) error {
		return l.h.st.LogCall(ctx, l.wf, e.Provider, micros, l.own([]store.Event{e})[0])
	})
}

// toolTurn logs a turn of tool calls: the tools called, and the first
// error one answered with.
func (l *stepLog) toolTurn(ctx context.Context, calls []llmclient.ToolCall, results []toolResult) {
	if l == nil {
		return
	}
	e := store.Event{Type: record.EventToolTurn}
	for i, c := range calls {
		e.Tools = append(e.Tools, c.Name)
		if i < len(results) && results[i].IsError && e.Error == "" {
			e.Error = c.Name + ": " + l.h.redact(results[i].Content)
		}
	}
	if l.h.o.EventContent {
		var b strings.Builder
		for _, c := range calls {
			b.WriteString(c.Name + "(" + c.Arguments + ")\n")
		}
		e.Prompt = l.h.redact(b.String())
	}
	l.log(ctx, e)
}

// do logs a durable call a code step made (not one it replayed).
func (l *stepLog) do(ctx context.Context, name string, err error) {
	if l == nil {
		return
	}
	e := store.Event{Type: record.EventDo, Name: name}
	if err != nil {
		e.Error = l.h.redact(err.Error())
	}
	l.log(ctx, e)
}

// redact removes the configuration's secrets from text bound for the log.
func (h *Handler) redact(s string) string {
	if h.o.Redact == nil {
		return s
	}
	return h.o.Redact(s)
}

// promptText is a request's system prompt and messages, one a line.
func promptText(req llmclient.Request) string {
	var b strings.Builder
	if req.System != "" {
		b.WriteString("system: " + req.System + "\n")
	}
	for _, m := range req.Messages {
		b.WriteString(m.Role + ": " + m.Content + "\n")
	}
	return b.String()
}
