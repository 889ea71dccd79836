package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/retry"
	"github.com/agentq/agentq/tasks"
)

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
		if err == nil || !flow.RedisUnavailable(err) || ctx.Err() != nil {
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

// settle records the outcome and enqueues the dependents it made ready.
// It runs even when the attempt's context has ended (a timeout must still
// be recorded), bounded by settleTimeout.
func (h *Handler) settle(ctx context.Context, run *stepRun, o store.Outcome, class retry.Class) error {
	return h.settleAs(ctx, run, o, class, "")
}

// settleAs is settle; reconciled, when set, says why the reconciler settled
// the step (its StepEvent carries it).
func (h *Handler) settleAs(ctx context.Context, run *stepRun, o store.Outcome, class retry.Class, reconciled string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	return h.record(ctx, run, o, class, reconciled)
}

// answerWindow is how long an answer is tried to be recorded while Redis
// does not answer: about asynq's lease on the step's task (30s, renewed by
// a heartbeat that needs Redis too), so an outage shorter than that
// loses no answer. The step does not pass to another worker before the
// lease lapses, and a lapse cancels the attempt's context, which ends the
// tries at once (the answer is then kept in this worker's memory).
const answerWindow = 25 * time.Second

// answerContext bounds the recording of an answer (answerWindow), and ends
// when the attempt's context is canceled (asynq's lease lapsed, or the
// workflow was canceled), not when its deadline passes: past the step's
// timeout the lease may still be this worker's.
func answerContext(ctx context.Context) (context.Context, context.CancelFunc) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), answerWindow)
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.Canceled) {
			cancel()
		}
	})
	return actx, func() { stop(); cancel() }
}

// record records an outcome within ctx (see settle). Past the workflow's
// deadline nothing is recorded: the workflow ends timed out.
func (h *Handler) record(ctx context.Context, run *stepRun, o store.Outcome, class retry.Class, reconciled string) error {
	p, wspec, st, r, attempt := run.p, run.spec, run.st, run.r, run.attempt
	if pastDeadline(run.deadline) {
		run.log.Info("outcome not recorded: the workflow's deadline passed while the step ran")
		return h.timeOut(ctx, p.Workflow, wspec, "")
	}
	o.Gen = p.Gen // an outcome of an earlier run (the workflow was rerun since) is refused
	o.NoDurableCalls = makesNoDurableCalls(st)
	if run.inst != nil {
		o.Map = st.ID // an instance counts toward its map; the map's dependents wait for it
		if h.st.EnqueuesTasks() {
			t := flow.QueuedTask(p.Workflow, record.InstanceID(st.ID, store.ReleaseProbe), p.Gen, wspec, st, h.st.Retention())
			o.Release = &t // the instance it releases, enqueued by the settle
		}
	}
	if o.Done && o.CostMicros == 0 { // a code step's or tool conversation's calls are priced one by one (durable.spend)
		o.CostMicros = costMicros(h.o.Prices, o.Target, o.Usage.PromptTokens, o.Usage.CompletionTokens)
	}
	deps := h.withTasks(flow.DependentsOf(wspec, st.ID), p.Workflow, p.Gen, wspec)
	// what the attempt did is logged with its outcome, in the same script
	carried, logged := stepLogOf(ctx).carryTo()
	o.Events = append(o.Events, carried...)
	var res *store.Settled
	// both writes are idempotent, so a Redis that is restarting is waited
	// for (within settleTimeout) rather than losing an answer already paid for
	err := untilStored(ctx, func() (err error) {
		res, err = h.st.Settle(ctx, p.Workflow, p.Step, o, deps)
		if errors.Is(err, store.ErrOldLayout) && h.st.MigrateFanIn(ctx, p.Workflow, inputCounts(wspec)) == nil {
			res, err = h.st.Settle(ctx, p.Workflow, p.Step, o, deps)
		}
		return err
	})
	// not confirmed by the replicas: landed on the primary all the same;
	// what follows is done as for any settle but the task is not
	// acknowledged (notConfirmed)
	err, unconfirmed := store.Unconfirmed(err)
	// the calls the events report were paid for whatever became of the
	// outcome: logged with it when it landed (the store logs the same
	// events once, and those of a step run again after it finished without
	// a second outcome); written on their own when the store refused it;
	// and when it is not known to have landed (its write failed, its reply
	// was lost), written unless it logged them
	switch {
	case err == nil, errors.Is(err, store.ErrNotFound):
		logged(landed)
	case errors.Is(err, store.ErrStaleAttempt), errors.Is(err, store.ErrOtherRun), errors.Is(err, store.ErrAlreadySettled),
		errors.Is(err, store.ErrOldLayout):
		logged(refused)
	default:
		logged(unsure)
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case errors.Is(err, store.ErrStaleAttempt), errors.Is(err, store.ErrOtherRun):
		return h.stale(p, o.Attempt, err)
	case errors.Is(err, store.ErrAlreadySettled):
		return err
	case err != nil:
		return fmt.Errorf("%w: %w", errNotRecorded, err)
	}
	state := res.State
	if h.o.BeforeEnqueue != nil {
		h.o.BeforeEnqueue(p.Workflow, p.Step, res.Ready)
	}
	// what the settle made ready and left to this worker: with durability
	// on, confirmed on the queue's primary as the settle was on the
	// workflow's (not confirmed: enqueued all the same, and reported as the
	// settle's own would be)
	var left []string
	for i, d := range res.Ready {
		if !res.Enqueued[i] {
			left = append(left, d)
		}
	}
	ready, err := flow.StepTasks(p.Workflow, wspec, left, res.Gen, h.st.Retention())
	if err != nil {
		return err
	}
	if res.Release >= 0 && !res.ReleaseEnqueued {
		ready = append(ready, flow.QueuedTask(p.Workflow, record.InstanceID(st.ID, res.Release), res.Gen, wspec, st, h.st.Retention()))
	}
	if len(ready) > 0 {
		err, notYet := store.Unconfirmed(untilStored(ctx, func() error { return flow.Enqueue(ctx, h.st, h.o.Client, ready...) }))
		if err != nil {
			return err // retried by asynq: the settle is idempotent and makes the same ones ready again
		}
		unconfirmed = cmp.Or(unconfirmed, notYet)
	}
	if h.handoffs != nil {
		h.handoffs.offer(ctx, p.Workflow, wspec, res.Ready, res.Gen)
	}
	if unconfirmed != nil {
		if err := h.notConfirmed(ctx, run, "outcome", unconfirmed); err != nil {
			return err // its step event when it is confirmed
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
	h.o.Events(StepEvent{Workflow: p.Workflow, Step: p.Step, Route: r.Route, State: stepState, WorkflowState: state,
		Target: o.Target, Degraded: o.Degraded, Attempt: attempt, Class: class, Err: serr, Reconciled: reconciled, HandedOff: deliveryOf(ctx).handoff})
	h.notifyEndedOf(ctx, p.Workflow, wspec, state, res)
	return nil
}

// errNotRecorded marks a settle whose write did not reach the store.
var errNotRecorded = errors.New("outcome not recorded")

// stale reports an attempt whose outcome the store refused: a later attempt
// has the step, or the safety net ended this one after asynq gave up on it.
// Nobody is waiting for this goroutine's result any more; the error keeps
// it from counting as one of the step's failures all the same.
func (h *Handler) stale(p tasks.Payload, attempt int, err error) error {
	h.o.Logger.Warn("outcome of an abandoned attempt not recorded: the step has moved on", "wf", p.Workflow, "step", p.Step,
		"attempt", attempt, "err", store.Excerpt(err.Error()))
	return &StepError{Class: retry.Stale, Err: err}
}

// recordAnswer settles a step with a provider's answer. When the store
// cannot take it (Redis away for longer than settleTimeout) or refuses it
// as stale, the answer is kept in memory (bounded) so that the step's next
// attempt on this worker records it instead of paying the provider again.
func (h *Handler) recordAnswer(ctx context.Context, run *stepRun, key answerKey, o store.Outcome) error {
	p, r := run.p, run.r
	actx, cancel := answerContext(ctx)
	err := h.record(actx, run, o, "", "")
	cancel()
	switch {
	case err == nil:
		h.answers.remove(key)
		return nil
	case errors.Is(err, store.ErrStaleAttempt):
		h.answers.put(key, o)
		return err
	case errors.Is(err, store.ErrNotConfirmed):
		h.answers.put(key, o) // recorded again without a call, should a promotion lose it
		return err
	case errors.Is(err, errNotRecorded):
		h.answers.put(key, o)
		h.o.Logger.Warn("answer kept in memory: it could not be recorded; the step's next attempt on this worker records it without calling the provider",
			"wf", p.Workflow, "step", p.Step, "attempt", o.Attempt, "err", store.Excerpt(err.Error()))
		h.o.Events(StepEvent{Workflow: p.Workflow, Step: p.Step, Route: r.Route, State: "unrecorded", Attempt: o.Attempt,
			Class: retry.Unrecorded, Err: err})
		return &StepError{Class: retry.Unrecorded, Err: err}
	}
	return err
}

// withTasks gives each dependent its task of generation gen, for the
// store to enqueue in the settle that makes it ready (when it can: see
// store.Task).
func (h *Handler) withTasks(deps []store.Dependent, wf string, gen int, wspec *spec.Spec) []store.Dependent {
	if !h.st.EnqueuesTasks() {
		return deps
	}
	for i := range deps {
		st, _ := wspec.Step(deps[i].ID)
		t := flow.QueuedTask(wf, deps[i].ID, gen, wspec, st, h.st.Retention())
		deps[i].Task = &t
	}
	return deps
}

// inputCounts is each step's depends_on, for a record an earlier agentq
// wrote (store.MigrateFanIn).
func inputCounts(s *spec.Spec) map[string][]string {
	out := make(map[string][]string, len(s.Steps))
	for _, st := range s.Steps {
		if len(st.DependsOn) > 0 {
			out[st.ID] = st.DependsOn
		}
	}
	return out
}

// makesNoDurableCalls reports whether step st (or each instance of map
// step st) makes no durable calls (a prompt step without tools: code
// steps and tool conversations keep theirs), so its settle has no calls
// key to keep.
func makesNoDurableCalls(st *spec.Step) bool {
	r := runnerOf(st)
	if m, ok := r.(mapRun); ok {
		r = m.each
	}
	_, ok := r.(promptRun)
	return ok
}
