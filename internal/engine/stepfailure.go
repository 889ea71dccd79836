package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/retry"
)

// What a failed attempt becomes: a degraded answer, a retry after a wait
// (decided and recorded here), or a dead letter.

// failed decides what a failed attempt becomes: degraded answer, delayed
// retry, or dead letter.
func (h *Handler) failed(ctx context.Context, run *stepRun, err error, hash string) error {
	p, st, r, attempt := run.p, run.st, run.r, run.attempt
	class := classOf(err)
	if class == retry.Canceled {
		return &StepError{Class: class, Err: err}
	}
	if st.Degrade == "template" {
		if rt, ok := h.o.Router.Route(r.Route); ok && rt.FallbackText != "" {
			return h.settle(ctx, run, store.Outcome{Done: true, Optional: st.Optional, Output: rt.FallbackText,
				Degraded: true, Target: "template", InputHash: hash, Error: err.Error(), Attempt: attempt}, class)
		}
	}
	d := deliveryOf(ctx)
	retried, maxRetry := d.retried, d.maxRetry
	if !class.Retryable() || retried >= maxRetry {
		return h.deadLetter(ctx, run, class, err)
	}
	se := &StepError{Class: class, Err: err}
	var re *router.RouteError
	if errors.As(err, &re) {
		se.RetryAfter = re.RetryAfter(time.Now())
	}
	if v, ok := asVerdict(err); ok && v.verdict == verdictRetry { // a code step's RetryAfter(d, err)
		se.RetryAfter = max(se.RetryAfter, v.after)
	}
	// waiting for rate limits to pass is not the step failing: it uses no
	// retry, within a bound so that a provider that never lets up still
	// ends in the dead-letter queue
	se.Free = class == retry.RateLimited && attempt <= 3*(maxRetry+1)
	var due time.Time
	if h.o.Retry != nil { // the wait, decided here so that its end is recorded with the error
		se.Delay = h.o.Retry.RetryDelay(retried, se, nil)
		due = time.Now().Add(se.Delay).Truncate(time.Second) // asynq keeps the due time in whole seconds, rounded down
	}
	carried, logged := stepLogOf(ctx).carry()
	rerr := h.st.RecordError(ctx, p.Workflow, p.Step, p.Gen, attempt, string(class), err.Error(), due, carried...)
	logged(!errors.Is(rerr, store.ErrStaleAttempt)) // refused: written on their own
	if errors.Is(rerr, store.ErrStaleAttempt) {
		return h.stale(p, attempt, rerr)
	} else if rerr != nil {
		h.o.Logger.Warn("could not record step error", "wf", p.Workflow, "step", p.Step, "err", store.Excerpt(rerr.Error()))
	}
	h.o.Logger.Warn("step attempt failed; will retry", "wf", p.Workflow, "step", p.Step, "attempt", attempt, "class", class, "err", store.Excerpt(err.Error()))
	h.o.Events(StepEvent{Workflow: p.Workflow, Step: p.Step, Route: r.Route, State: "retrying", Attempt: attempt, Class: class, Err: err, RetryAfter: se.RetryAfter})
	return se
}

// deadLetter settles the step as dead and archives the task with the reason.
func (h *Handler) deadLetter(ctx context.Context, run *stepRun, class retry.Class, err error) error {
	p, st := run.p, run.st
	reason := store.Excerpt(fmt.Sprintf("%s: %v", class, err))
	o := store.Outcome{Done: false, Optional: st.Optional, Error: reason, Class: string(class), Attempt: run.attempt}
	if class == retry.InvalidOutput {
		o.Output = rejectedOutput(err)
		if len(o.Output) > h.o.MaxOutputBytes {
			o.Output = strings.ToValidUTF8(o.Output[:h.o.MaxOutputBytes], "")
		}
	}
	if serr := h.settle(ctx, run, o, class); serr != nil {
		return serr
	}
	h.o.Logger.Error("step dead-lettered", "wf", p.Workflow, "step", p.Step, "class", class, "err", reason)
	return fmt.Errorf("%s: %w", reason, asynq.SkipRetry)
}

func classOf(err error) retry.Class { return retry.ClassOf(err) }

// rejectedOutput is the last answer in err that failed an output check.
func rejectedOutput(err error) string {
	var re *router.RouteError
	if errors.As(err, &re) {
		for i := len(re.Attempts) - 1; i >= 0; i-- {
			var inv *router.InvalidOutputError
			if errors.As(re.Attempts[i], &inv) {
				return inv.Output
			}
		}
	}
	var inv *router.InvalidOutputError
	if errors.As(err, &inv) {
		return inv.Output
	}
	return ""
}
