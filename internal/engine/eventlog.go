package engine

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// stepLog logs what one attempt of a step does besides changing its state
// (its LLM calls, tool turns, durable calls, streamed text) to its
// workflow's event log; the state changes are logged by the store, with
// the change. What the attempt did waits (pending) for the attempt's
// outcome, which the store logs with it in the same script, or at most
// passengerWait, so that a step that answers fast costs the log no write
// of its own and a slow one is still seen live. A nil stepLog (a step run
// by a test) logs nothing.
type stepLog struct {
	h       *Handler
	ctx     context.Context
	wf      string
	step    string
	attempt int

	wmu     sync.Mutex // one write at a time, in order
	mu      sync.Mutex
	pending []store.Event
	timer   *time.Timer
	closed  bool // the outcome was logged: what comes later is dropped
	streams bool // a stream has begun in this attempt
}

// passengerWait is the longest an event waits for its step's outcome.
const passengerWait = 500 * time.Millisecond

type stepLogKey struct{}

// withStepLog returns ctx carrying the attempt's log and hearing the
// router's calls under it. It is there with the log off too: the calls'
// cost by provider is counted with their events.
func (h *Handler) withStepLog(ctx context.Context, run *stepRun) context.Context {
	l := &stepLog{h: h, ctx: context.WithoutCancel(ctx), wf: run.p.Workflow, step: run.p.Step, attempt: run.attempt}
	ctx = context.WithValue(ctx, stepLogKey{}, l)
	return router.WithCallHook(ctx, l.call)
}

func stepLogOf(ctx context.Context) *stepLog {
	l, _ := ctx.Value(stepLogKey{}).(*stepLog)
	return l
}

// add keeps an event for the attempt's outcome to carry, or for the
// write passengerWait later, whichever comes first.
func (l *stepLog) add(e store.Event) {
	if l == nil || (l.h.o.EventLimit <= 0 && e.CostUSD <= 0) {
		return
	}
	e.Step, e.Attempt, e.At = l.step, l.attempt, time.Now().UTC()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed { // after the outcome (a hedge's loser, a goroutine the step left)
		if e.CostUSD > 0 {
			go l.write([]store.Event{e}) // it was paid for: its spend counts (and the history says so)
		}
		return
	}
	l.pending = append(l.pending, e)
	if l.timer == nil {
		l.timer = time.AfterFunc(passengerWait, func() { l.log() })
	}
}

// log writes what is pending, then evs, now.
func (l *stepLog) log(evs ...store.Event) {
	if l == nil {
		return
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	for i := range evs {
		evs[i].Step, evs[i].Attempt = l.step, l.attempt
	}
	l.write(append(l.take(), evs...))
}

// firstStream reports whether no stream has begun in this attempt yet,
// and notes that one has.
func (l *stepLog) firstStream() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := !l.streams
	l.streams = true
	return first
}

// take returns what is pending and forgets it.
func (l *stepLog) take() []store.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	evs := l.pending
	l.pending = nil
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	return evs
}

// landing is what became of the write that carried the attempt's events.
type landing int

const (
	// landed: the store took it, and logged the events with it (or had
	// logged them: the same events sent again are not logged twice).
	landed landing = iota
	// refused: the store wrote nothing (a stale outcome, another run's,
	// a step settled already); the events are written on their own.
	refused
	// unsure: the write failed, or its reply was lost, so it may have
	// landed; the events are written on their own unless it logged them
	// (store.LogOnce).
	unsure
)

// carry hands what is pending to the attempt's outcome (store.Outcome's
// Events), holding the log's writes until done is called with whether
// the outcome may have landed: if so, the log is closed (what comes after
// the outcome is dropped); if the store refused it (a stale outcome), the
// events are written on their own, since the calls were made.
func (l *stepLog) carry() (evs []store.Event, done func(landed bool)) {
	evs, end := l.carryTo()
	return evs, func(ok bool) {
		if ok {
			end(landed)
		} else {
			end(refused)
		}
	}
}

// carryTo is carry, done saying what became of the outcome: the calls
// the events report were paid for, so they are logged once whatever it
// was, and after an outcome that landed or may have the log is closed
// (what comes after it is dropped, but for a paid call).
func (l *stepLog) carryTo() (evs []store.Event, done func(landing)) {
	if l == nil {
		return nil, func(landing) {}
	}
	l.wmu.Lock()
	evs = l.take()
	return evs, func(how landing) {
		if how != refused {
			l.mu.Lock()
			l.closed = true
			l.mu.Unlock()
		}
		switch how {
		case refused:
			l.write(evs)
		case unsure:
			l.writeOnce(evs)
		}
		l.wmu.Unlock()
	}
}

// write appends events, waiting for Redis no longer than a settle: an
// event that cannot be written is noted in the worker's log and dropped
// (the state changes it accompanies are logged by the store, atomically).
func (l *stepLog) write(evs []store.Event) {
	l.writeWith(evs, l.h.st.Log)
}

// writeOnce is write for events an outcome carried that may have landed:
// they are logged unless it logged them.
func (l *stepLog) writeOnce(evs []store.Event) {
	l.writeWith(evs, func(ctx context.Context, wf string, evs ...store.Event) error {
		return l.h.st.LogOnce(ctx, wf, l.step, evs...)
	})
}

func (l *stepLog) writeWith(evs []store.Event, log func(context.Context, string, ...store.Event) error) {
	if len(evs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(l.ctx, settleTimeout)
	defer cancel()
	if err := log(ctx, l.wf, evs...); err != nil {
		l.h.o.Logger.Warn("events not logged", "wf", l.wf, "step", l.step, "first", evs[0].Type, "n", len(evs), "err", store.Excerpt(err.Error()))
	}
}

// call logs one LLM call: who answered, with which key (its fingerprint),
// how long it took, its tokens and cost, and its class when it failed;
// with events.content its messages and answer, redacted.
func (l *stepLog) call(c router.CallReport) {
	target := c.Target.Provider.Name() + "/" + c.Target.Model
	e := store.Event{Type: record.EventLLMCall, Route: c.Route, Target: target, Provider: c.Target.Provider.Name(), Key: c.Key,
		LatencyMS: c.Latency.Milliseconds(), PromptTokens: c.Usage.PromptTokens, CompletionTokens: c.Usage.CompletionTokens}
	if c.Class != retry.OK {
		e.Class = string(c.Class)
	}
	e.CostUSD = float64(costMicros(l.h.o.Prices, target, c.Usage.PromptTokens, c.Usage.CompletionTokens)) / 1e6
	if l.h.o.EventContent {
		e.Prompt = l.h.redact(promptText(c.Request))
		if c.Response != nil {
			e.Answer = l.h.redact(c.Response.Text)
		}
	}
	l.add(e)
}

// toolTurn logs a turn of tool calls: the tools called, and the first
// error one answered with.
func (l *stepLog) toolTurn(calls []llmclient.ToolCall, results []toolResult) {
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
	l.add(e)
}

// do logs a durable call a code step made (not one it replayed).
func (l *stepLog) do(name string, err error) {
	if l == nil {
		return
	}
	e := store.Event{Type: record.EventDo, Name: name}
	if err != nil {
		e.Error = l.h.redact(err.Error())
	}
	l.add(e)
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
