package router

import (
	"context"
	"fmt"

	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// attempt is one target's turn on a route. Its policies run in this
// order, each in its own file with its own tests:
//
//	budgets    budget.go       reserve the most the call may spend, or refuse: budget_exceeded
//	max input  attempt.go      a request over the target's max_input_bytes skips it: context_length
//	breaker    breaker.go      an open breaker skips the target; past its cooldown one call probes it
//	keys       keyrotation.go  each usable key in turn: a rate-limited key cools, a refused one is disabled
//	limits     limits.go       a slot under the provider's concurrency and requests per minute, or skip
//	call       call.go         the call with its timeout, recorded in the breaker and the health scores
//
// then the budgets settle with what the call spent. A policy that refuses
// skips the target without a call, so no breaker, health score or key
// hears of it. Around attempt, chat (router.go) orders the targets by
// health (health.go), hedges a slow one (hedge.go), repairs an invalid
// answer once on its target (output.go) and sends a request every target
// refuses to the route's fallback for its class (route.go).
func (r *Router) attempt(ctx context.Context, route string, t Target, req ask, rerr *RouteError) (*answer, error) {
	req.Model = t.Model
	h, err := r.budgets.reserve(ctx, route, t, req.Request)
	if err == nil {
		err = fitsInput(t, req.Request)
	}
	var probe bool
	if err == nil {
		probe, err = r.breakers.admit(ctx, t)
	}
	var resp *answer
	if err == nil {
		resp, err = r.callKeys(ctx, route, &t, &req, probe, rerr)
	} else {
		rerr.Attempts = append(rerr.Attempts, err)
	}
	h.settleAfter(ctx, resp, err)
	return resp, err
}

// fitsInput skips a target whose max_input_bytes the request is over.
func fitsInput(t Target, req llmclient.Request) error {
	if n := inputLen(req); t.MaxInputBytes > 0 && n > t.MaxInputBytes {
		return &SkippedError{Target: t.String(), class: retry.ContextLength,
			Reason: fmt.Sprintf("the request is %d bytes, over the target's max_input_bytes of %d", n, t.MaxInputBytes)}
	}
	return nil
}
