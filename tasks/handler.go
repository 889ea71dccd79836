package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/codes"

	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// Caller is what the handler needs of the router.
type Caller interface {
	Chat(ctx context.Context, route string, req llmclient.Request) (*llmclient.Response, error)
	Route(name string) (llmclient.Route, bool)
}

// HandlerOptions configures a Handler.
type HandlerOptions struct {
	Store  *store.Store
	Client *asynq.Client // enqueues dependents
	Router Caller
	Logger *slog.Logger // nil: discard
	// MaxOutputBytes bounds a step's stored output; 0 means 1 MiB.
	MaxOutputBytes int
	// Events, when set, hears each settled step (metrics, demo output).
	Events func(StepEvent)
	// BeforeEnqueue, when set, is called after a step settled and before
	// the dependents it made ready are enqueued. Crash drills use it to
	// stop a worker at the worst moment.
	BeforeEnqueue func(wf, step string, ready []string)
}

// StepEvent reports a settled step, or (State "retrying") a failed attempt
// that will be retried.
type StepEvent struct {
	Workflow, Step, Route, State, WorkflowState string
	Target                                      string // provider/model that answered, or "template"
	Degraded                                    bool
	Attempt                                     int
	Class                                       retry.Class
	Err                                         error
	RetryAfter                                  time.Duration // the provider's ask, for "retrying"
}

// Handler runs step tasks. It is an asynq.Handler.
type Handler struct {
	o     HandlerOptions
	specs specCache
}

// NewHandler returns a Handler.
func NewHandler(o HandlerOptions) (*Handler, error) {
	if o.Store == nil || o.Client == nil || o.Router == nil {
		return nil, errors.New("tasks: handler needs a store, a client and a router")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = 1 << 20
	}
	if o.Events == nil {
		o.Events = func(StepEvent) {}
	}
	return &Handler{o: o, specs: specCache{max: 4096}}, nil
}

// classBusy marks a duplicate delivery that waits for the step's lease.
const classBusy retry.Class = "busy"

// busyRecheck is how soon a busy duplicate looks again.
const busyRecheck = time.Second

// StepError is the error a step task returns when its attempt failed and
// should be retried later; RetryDelay reads it.
type StepError struct {
	Class      retry.Class
	RetryAfter time.Duration // the earliest wait a provider asked for
	Free       bool          // does not use up one of the step's retries
	Err        error
}

func (e *StepError) Error() string { return fmt.Sprintf("%s: %v", e.Class, e.Err) }
func (e *StepError) Unwrap() error { return e.Err }

// ProcessTask implements asynq.Handler.
func (h *Handler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	p, err := decodePayload(t.Payload())
	if err != nil {
		h.o.Logger.Error("step task dead-lettered: bad payload", "err", err)
		return fmt.Errorf("%v: %w", err, asynq.SkipRetry)
	}
	log := h.o.Logger.With("wf", p.Workflow, "step", p.Step)
	spec, err := h.specs.get(ctx, h.o.Store, p.Workflow)
	if errors.Is(err, store.ErrNotFound) {
		log.Warn("step task dropped: workflow not found (expired or never written)")
		return nil
	}
	if err != nil {
		return err
	}
	st, ok := spec.Step(p.Step)
	if !ok {
		return fmt.Errorf("workflow %s has no step %q: %w", p.Workflow, p.Step, asynq.SkipRetry)
	}
	r := spec.resolve(st)
	taskID, _ := asynq.GetTaskID(ctx)
	var a *store.Attempt
	bctx, bcancel := context.WithTimeout(ctx, settleTimeout)
	err = untilStored(bctx, func() (err error) { // the same owner may take its own lease again
		a, err = h.o.Store.Begin(bctx, p.Workflow, p.Step, taskID, r.Timeout+settleTimeout, st.inputs)
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
		log.Warn("step task dropped: workflow not found")
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
	if a.WorkflowState == store.StateCanceled {
		log.Info("step skipped: workflow canceled")
		return nil
	}
	ctx, span := stepContext(ctx, p, r.Route, a.Step.Attempts)
	defer span.End()
	err = h.process(ctx, p, spec, st, r, a)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}

// process runs one attempt of a step that Begin let through.
func (h *Handler) process(ctx context.Context, p Payload, spec *Spec, st *Step, r resolved, a *store.Attempt) error {
	log := h.o.Logger.With("wf", p.Workflow, "step", p.Step)
	views := make(map[string]StepView, len(a.Deps))
	for id, d := range a.Deps {
		views[id] = viewOf(spec, id, d.Output, d.Degraded, d.State != store.StepDone)
	}
	system, err := render(st.systemT, spec.Input, views)
	var prompt string
	if err == nil {
		prompt, err = render(st.promptT, spec.Input, views)
	}
	if err != nil {
		return h.deadLetter(ctx, p, spec, st, r, retry.BadRequest, err, a.Step.Attempts)
	}
	if _, ok := h.o.Router.Route(r.Route); !ok {
		return h.deadLetter(ctx, p, spec, st, r, retry.BadRequest, fmt.Errorf("route %q is not configured on this worker", r.Route), a.Step.Attempts)
	}
	hash := inputHash(r.Route, system, prompt)
	if a.Step.State == store.StepDone && a.Step.InputHash == hash {
		// checkpoint: a redelivery of a finished step does not call the LLM again
		log.Info("step checkpoint hit: not calling the LLM again")
		return h.settle(ctx, p, spec, st, r, store.Outcome{Done: true, Output: a.Step.Output, ToolCalls: a.Step.ToolCalls, Degraded: a.Step.Degraded,
			Target: a.Step.Target, Usage: a.Step.Usage, InputHash: hash, Optional: st.Optional}, a.Step.Attempts, "")
	}
	req := llmclient.Request{System: system, Messages: []llmclient.Message{{Role: "user", Content: prompt}}, MaxTokens: st.MaxTokens,
		Temperature: st.Temperature, Tools: st.toolsRequest(), Output: st.outputRequest()}
	callCtx, cancel := withSettleMargin(ctx)
	resp, err := h.o.Router.Chat(callCtx, r.Route, req)
	cancel()
	if err != nil {
		return h.failed(ctx, p, spec, st, r, err, a.Step.Attempts, hash)
	}
	out := resp.Text
	if len(out) > h.o.MaxOutputBytes {
		out = strings.ToValidUTF8(out[:h.o.MaxOutputBytes], "") // no rune cut in half
	}
	var calls string
	if len(resp.ToolCalls) > 0 {
		b, _ := json.Marshal(resp.ToolCalls)
		calls = string(b)
	}
	return h.settle(ctx, p, spec, st, r, store.Outcome{Done: true, Optional: st.Optional, Output: out, ToolCalls: calls,
		Target: resp.Provider + "/" + resp.Model, InputHash: hash,
		Usage: store.Usage{PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens}}, a.Step.Attempts, "")
}

// failed decides what a failed attempt becomes: degraded answer, delayed
// retry, or dead letter.
func (h *Handler) failed(ctx context.Context, p Payload, spec *Spec, st *Step, r resolved, err error, attempt int, hash string) error {
	class := classOf(err)
	if class == retry.Canceled {
		return &StepError{Class: class, Err: err}
	}
	if st.Degrade == "template" {
		if rt, ok := h.o.Router.Route(r.Route); ok && rt.FallbackText != "" {
			return h.settle(ctx, p, spec, st, r, store.Outcome{Done: true, Optional: st.Optional, Output: rt.FallbackText,
				Degraded: true, Target: "template", InputHash: hash, Error: err.Error()}, attempt, class)
		}
	}
	retried, _ := asynq.GetRetryCount(ctx)
	maxRetry, _ := asynq.GetMaxRetry(ctx)
	if !class.Retryable() || retried >= maxRetry {
		return h.deadLetter(ctx, p, spec, st, r, class, err, attempt)
	}
	if rerr := h.o.Store.RecordError(ctx, p.Workflow, p.Step, err.Error()); rerr != nil {
		h.o.Logger.Warn("could not record step error", "wf", p.Workflow, "step", p.Step, "err", rerr)
	}
	se := &StepError{Class: class, Err: err}
	var re *llmclient.RouteError
	if errors.As(err, &re) {
		se.RetryAfter = re.RetryAfter(time.Now())
	}
	// waiting for rate limits to pass is not the step failing: it uses no
	// retry, within a bound so that a provider that never lets up still
	// ends in the dead-letter queue
	se.Free = class == retry.RateLimited && attempt <= 3*(maxRetry+1)
	h.o.Logger.Warn("step attempt failed; will retry", "wf", p.Workflow, "step", p.Step, "attempt", attempt, "class", class, "err", err)
	h.o.Events(StepEvent{Workflow: p.Workflow, Step: p.Step, Route: r.Route, State: "retrying", Attempt: attempt, Class: class, Err: err, RetryAfter: se.RetryAfter})
	return se
}

// deadLetter settles the step as dead and archives the task with the reason.
func (h *Handler) deadLetter(ctx context.Context, p Payload, spec *Spec, st *Step, r resolved, class retry.Class, err error, attempt int) error {
	reason := fmt.Sprintf("%s: %v", class, err)
	o := store.Outcome{Done: false, Optional: st.Optional, Error: reason}
	if class == retry.InvalidOutput {
		o.Output = rejectedOutput(err)
		if len(o.Output) > h.o.MaxOutputBytes {
			o.Output = strings.ToValidUTF8(o.Output[:h.o.MaxOutputBytes], "")
		}
	}
	if serr := h.settle(ctx, p, spec, st, r, o, attempt, class); serr != nil {
		return serr
	}
	h.o.Logger.Error("step dead-lettered", "wf", p.Workflow, "step", p.Step, "class", class, "err", err)
	return fmt.Errorf("%s: %w", reason, asynq.SkipRetry)
}

// withSettleMargin shortens the attempt's deadline for LLM calls so that
// the handler still has time to record the outcome before asynq gives up
// on the attempt: a fifth of the attempt's budget, at most 2s.
func withSettleMargin(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	budget := time.Until(dl)
	margin := min(budget/5, 2*time.Second)
	return context.WithDeadline(ctx, dl.Add(-margin))
}

// settleTimeout bounds bookkeeping that must outlive the attempt's deadline.
const settleTimeout = 5 * time.Second

// untilStored runs an idempotent write until it succeeds, fails for a
// reason other than Redis being unreachable, or ctx ends: 100ms, doubling
// to 1s, between tries. A Redis restart then costs a step a few seconds,
// not a failed attempt.
func untilStored(ctx context.Context, write func() error) error {
	delay := 100 * time.Millisecond
	for {
		err := write()
		if err == nil || !redisUnavailable(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// redisUnavailable reports an error that says Redis could not be reached
// or is still loading its data, as opposed to an answer.
func redisUnavailable(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.HasPrefix(err.Error(), "LOADING ") || strings.Contains(err.Error(), "LOADING Redis is loading")
}

// settle records the outcome and enqueues the dependents it made ready.
// It runs even when the attempt's context has ended (a timeout must still
// be recorded), bounded by settleTimeout.
func (h *Handler) settle(ctx context.Context, p Payload, spec *Spec, st *Step, r resolved, o store.Outcome, attempt int, class retry.Class) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	var deps []store.Dependent
	for _, d := range spec.Dependents(st.ID) {
		ds, _ := spec.Step(d)
		deps = append(deps, store.Dependent{ID: d, Deps: ds.DependsOn})
	}
	var (
		state string
		ready []string
	)
	// both writes are idempotent, so a Redis that is restarting is waited
	// for (within settleTimeout) rather than losing an answer already paid for
	err := untilStored(ctx, func() (err error) {
		state, ready, err = h.o.Store.Settle(ctx, p.Workflow, st.ID, o, deps)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if h.o.BeforeEnqueue != nil {
		h.o.BeforeEnqueue(p.Workflow, st.ID, ready)
	}
	for _, d := range ready {
		if err := untilStored(ctx, func() error {
			return enqueueStep(ctx, h.o.Client, p.Workflow, spec, d, h.o.Store.Retention())
		}); err != nil {
			return err // retried by asynq: the settle is idempotent and returns d again
		}
	}
	stepState := store.StepDone
	if !o.Done {
		stepState = store.StepDead
	}
	var serr error
	if o.Error != "" {
		serr = errors.New(o.Error)
	}
	h.o.Events(StepEvent{Workflow: p.Workflow, Step: st.ID, Route: r.Route, State: stepState, WorkflowState: state,
		Target: o.Target, Degraded: o.Degraded, Attempt: attempt, Class: class, Err: serr})
	return nil
}

// HandleError implements asynq.ErrorHandler. It is the safety net for
// attempts the handler could not settle itself (the attempt's deadline
// passed before it returned, or it panicked): when asynq will not retry
// the task again, the step is settled dead unless it already was.
func (h *Handler) HandleError(ctx context.Context, t *asynq.Task, err error) {
	if t.Type() != TypeStep {
		return
	}
	retried, _ := asynq.GetRetryCount(ctx)
	maxRetry, _ := asynq.GetMaxRetry(ctx)
	if retried < maxRetry && !errors.Is(err, asynq.SkipRetry) {
		return
	}
	var se *StepError
	if errors.As(err, &se) && se.Class == classBusy {
		return // a duplicate; the task that holds the step settles it
	}
	if errors.Is(err, store.ErrOldLayout) {
		return // this worker cannot settle that record either
	}
	p, perr := decodePayload(t.Payload())
	if perr != nil {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	spec, serr := h.specs.get(sctx, h.o.Store, p.Workflow)
	if serr != nil {
		return
	}
	st, ok := spec.Step(p.Step)
	if !ok {
		return
	}
	class := classOf(err)
	if errors.Is(err, context.DeadlineExceeded) {
		class = retry.Timeout
	}
	o := store.Outcome{Done: false, OnlyIfOpen: true, Optional: st.Optional, Error: fmt.Sprintf("%s: %v", class, err)}
	if err := h.settle(sctx, p, spec, st, spec.resolve(st), o, 0, class); err != nil {
		h.o.Logger.Error("could not settle a step asynq gave up on", "wf", p.Workflow, "step", p.Step, "err", err)
	}
}

func classOf(err error) retry.Class { return llmclient.ClassOf(err) }
