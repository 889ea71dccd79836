package router

// Hedging: a second target is asked when the first is slow, and the first
// answer wins.

import (
	"context"
	"time"

	"github.com/agentq/agentq/retry"
)

// hedgeDelay is when to hedge the call to t, or 0 for never.
func (r *Router) hedgeDelay(rt Route, t Target) time.Duration {
	if rt.HedgeQuantile > 0 {
		if d, ok := r.health.Latency(t.Provider.Name(), t.Model, rt.HedgeQuantile); ok {
			return d
		}
		return 0 // no latency known yet: nothing to hedge against
	}
	return rt.HedgeAfter
}

// hedged calls target a; if it has not answered after delay, also target
// b. The first answer wins and the other call is canceled (its log line
// and breaker record say canceled). It returns the winner's index, or -1
// when a failed before the hedge went out (so b was not tried).
func (r *Router) hedged(ctx context.Context, route string, rt Route, a, b int, req ask, delay time.Duration, rerr *RouteError) (*answer, int, error) {
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		resp     *answer
		err      error
		idx      int
		attempts []error
	}
	ch := make(chan result, 2)
	launch := func(i int) {
		go func() {
			sub := &RouteError{}
			resp, err := r.attempt(hctx, route, rt.Targets[i], req, sub)
			ch <- result{resp, err, i, sub.Attempts}
		}()
	}
	launch(a)
	timer := time.NewTimer(delay)
	defer timer.Stop()
	out, hedged := 1, false
	var last error
	for out > 0 {
		select {
		case <-timer.C:
			if !hedged {
				hedged = true
				out++
				r.log.Info("hedging", "route", route, "slow", rt.Targets[a].String(), "after", delay, "to", rt.Targets[b].String())
				launch(b)
			}
		case res := <-ch:
			out--
			rerr.Attempts = append(rerr.Attempts, res.attempts...)
			if res.err == nil {
				return res.resp, res.idx, nil
			}
			last = res.err
			if !hedged {
				return nil, -1, res.err // a failed first: go on in order
			}
			if retry.ClassOf(res.err).RequestFault() {
				return nil, res.idx, res.err
			}
		}
	}
	return nil, b, last
}
