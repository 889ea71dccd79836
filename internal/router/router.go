// Package router sends a request along a route of targets (provider and
// model) and keeps it answered when providers fail: failover, key
// rotation, circuit breakers, health-scored order, hedging, limits,
// budgets and fallbacks. Each policy is one file; attempt.go runs them in
// order for one target. Shared state (keys, breakers, health, budgets,
// limits) is behind interfaces the store implements, so every worker sees
// the same.
package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

var tracer = otel.Tracer("github.com/agentq/agentq/router")

// RouterOptions configures a Router. The zero value works.
type RouterOptions struct {
	Logger   *slog.Logger     // nil: discard
	Observer Observer         // nil: none
	Now      func() time.Time // nil: time.Now
	// Keys holds key cooldowns and disables; nil: a local-only pool.
	Keys *KeyPools
	// DefaultCooldown cools a rate-limited key that sent no Retry-After
	// (resilience.keys.default_cooldown); MaxCooldown caps any key
	// cooldown (max_cooldown). Both are taken as given: NewRouter refuses
	// them unset.
	DefaultCooldown time.Duration
	MaxCooldown     time.Duration
	// Breakers holds the targets' circuit breakers; nil: local-only
	// breakers with breaker.DefaultConfig.
	Breakers *Breakers
	// Health scores targets for the "health" strategy (a scorer of the
	// configuration's resilience.health); NewRouter refuses none.
	Health *Health
	// Random feeds the weighted choice among close targets; nil: math/rand/v2.
	Random func() float64
	// Limits are providers' cluster-wide caps, enforced by Limiter (both
	// needed; a provider without an entry has no caps).
	Limits  map[string]Limit
	Limiter Limiter
	// Budgets cap tokens and spend per route or provider per period
	// (budget.go); the zero value: none.
	Budgets Budgets
}

// Router sends a request along a route: the first target that answers
// wins; on failure it moves on at once (it never sleeps: delayed retries
// belong to the task queue). Keys are rotated on key-level failures.
type Router struct {
	routes           map[string]Route
	log              *slog.Logger
	obs              Observer
	now              func() time.Time
	keys             *KeyPools
	limits           map[string]Limit
	limiter          Limiter
	breakers         *Breakers
	health           *Health
	random           func() float64
	defCool, maxCool time.Duration
	budgets          *budgets
}

// NewRouter builds a router over routes.
func NewRouter(routes []Route, o RouterOptions) (*Router, error) {
	r := &Router{routes: map[string]Route{}, log: o.Logger, obs: o.Observer, now: o.Now}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.obs == nil {
		r.obs = nopObserver{}
	}
	if r.now == nil {
		r.now = time.Now
	}
	r.keys, r.defCool, r.maxCool, r.breakers = o.Keys, o.DefaultCooldown, o.MaxCooldown, o.Breakers
	if r.keys == nil {
		r.keys = NewKeyPools(nil, r.now, r.log)
	}
	if r.breakers == nil {
		r.breakers = NewBreakers(nil, breaker.DefaultConfig, r.now, nil, r.log)
	}
	r.health, r.random, r.limits, r.limiter = o.Health, o.Random, o.Limits, o.Limiter
	if r.health == nil {
		return nil, errors.New("router: no health scorer (RouterOptions.Health)")
	}
	if r.random == nil {
		r.random = rand.Float64
	}
	if r.defCool <= 0 || r.maxCool <= 0 {
		return nil, fmt.Errorf("router: key cooldowns %s and %s must be positive (the configuration's resilience.keys)", r.defCool, r.maxCool)
	}
	r.budgets = newBudgets(o.Budgets, r)
	for _, rt := range routes {
		if len(rt.Targets) == 0 {
			return nil, fmt.Errorf("llmclient: route %q has no targets", rt.Name)
		}
		r.routes[rt.Name] = rt
	}
	return r, nil
}

// Route returns the named route.
func (r *Router) Route(name string) (Route, bool) {
	rt, ok := r.routes[name]
	return rt, ok
}

// Chat sends req along the named route. req.Model is set per target.
func (r *Router) Chat(ctx context.Context, route string, req llmclient.Request) (*llmclient.Response, error) {
	a, err := r.chat(ctx, route, ask{Request: req})
	if err != nil {
		return nil, err
	}
	return a.Response, nil
}

// chat sends req along the named route: the targets in the route's order,
// each through the policies (attempt); an invalid answer is repaired once
// on its target; a request the targets refuse goes to the route's fallback
// for its class. (The hedge, the repair and the fallback run in functions
// of their own: a call waits under this frame, call.go says why.)
func (r *Router) chat(ctx context.Context, route string, req ask) (*answer, error) {
	rt, ok := r.routes[route]
	if !ok {
		return nil, fmt.Errorf("llmclient: unknown route %q", route)
	}
	rerr := &RouteError{Route: route}
	var buf [8]int
	order := r.health.order(rt.Targets, rt.Strategy, r.random, buf[:0])
	for n := 0; n < len(order); n++ {
		t := rt.Targets[order[n]]
		if slices.Contains(req.skip, t.String()) {
			continue // its stream failed midway
		}
		var (
			resp *answer
			err  error
		)
		// structured-output calls are not hedged: a repair goes to the
		// target that gave the invalid answer
		if delay := r.hedgeDelay(rt, t); delay > 0 && n+1 < len(order) && !req.stream && req.Output == nil {
			var won int
			if resp, won, err = r.tryHedged(ctx, route, &rt, order, n, &req, delay, rerr); err == nil {
				return resp, nil
			}
			if won >= 0 {
				n++ // both were tried
			}
		} else if resp, err = r.attempt(ctx, route, t, req, rerr); err == nil {
			if n > 0 {
				r.obs.Fallback(route, rt.Targets[order[0]].String(), t.String())
			}
			return resp, nil
		} else if inv := (*InvalidOutputError)(nil); errors.As(err, &inv) {
			if resp, err = r.repair(ctx, route, &rt, order[0], n, &t, &req, inv, rerr); err == nil {
				return resp, nil
			}
		}
		if class := retry.ClassOf(err); class == retry.Canceled || class.RequestFault() {
			return r.requestRefused(ctx, route, &rt, &t, &req, class, rerr)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, rerr
}

// tryHedged calls the route's nth and next targets, hedged (hedge.go).
//
//go:noinline
func (r *Router) tryHedged(ctx context.Context, route string, rt *Route, order []int, n int, req *ask, delay time.Duration, rerr *RouteError) (*answer, int, error) {
	resp, won, err := r.hedged(ctx, route, *rt, order[n], order[n+1], *req, delay, rerr)
	if err == nil && (won != order[0] || n > 0) {
		r.obs.Fallback(route, rt.Targets[order[0]].String(), rt.Targets[won].String())
	}
	return resp, won, err
}

// repair asks target t once more, told what was wrong with its answer
// (inv), as the route's nth target (first is the route's first).
//
//go:noinline
func (r *Router) repair(ctx context.Context, route string, rt *Route, first, n int, t *Target, req *ask, inv *InvalidOutputError, rerr *RouteError) (*answer, error) {
	resp, err := r.attempt(ctx, route, *t, repairRequest(*req, inv), rerr)
	if err == nil && n > 0 {
		r.obs.Fallback(route, rt.Targets[first].String(), t.String())
	}
	return resp, err
}

// requestRefused ends a route whose target t refused the request itself
// (class): canceled, or the route's fallback for the class, if it has one
// and it answers.
//
//go:noinline
func (r *Router) requestRefused(ctx context.Context, route string, rt *Route, t *Target, req *ask, class retry.Class, rerr *RouteError) (*answer, error) {
	if class == retry.Canceled {
		return nil, rerr
	}
	// the request, not the target, is the problem: only the route's
	// fallback for this class can help
	if fb := rt.fallbackFor(class); fb != nil && !slices.Contains(req.skip, fb.String()) {
		if resp, err := r.attempt(ctx, route, *fb, *req, rerr); err == nil {
			r.obs.Fallback(route, t.String(), fb.String())
			return resp, nil
		}
	}
	return nil, rerr
}

// ChatStream sends req along the named route and returns the first
// target's stream that starts answering; a target that fails before its
// first piece is handled like a failed call (breaker, keys, next target).
// Streams are not hedged: the first piece decides.
//
// A stream that fails midway fails over too: its target's breaker and
// health hear of the failure, and the stream goes on with the route's
// targets not tried midway yet; Recv says so with ErrStreamReset.
func (r *Router) ChatStream(ctx context.Context, route string, req llmclient.Request) (*Stream, error) {
	return r.stream(ctx, route, ask{Request: req, stream: true})
}

// stream opens req's stream along the route, skipping the targets in
// req.skip, and arms its failover midway.
func (r *Router) stream(ctx context.Context, route string, req ask) (*Stream, error) {
	resp, err := r.chat(ctx, route, req)
	if err != nil {
		return nil, err
	}
	s, t := resp.stream, r.targetOf(route, resp.Provider, resp.Model)
	s.resume = func(cause error) (*Stream, error) {
		class := retry.ClassOf(cause)
		if class == retry.Canceled || ctx.Err() != nil || t == nil {
			return nil, cause
		}
		// the call counted as answered at its first piece: its failure
		// midway is what the breaker and the health scores hear of now
		r.breakers.Record(ctx, t.Provider.Name(), t.Model, class, false)
		r.health.observe(t.Provider.Name(), t.Model, class, 0)
		if req.endMidway {
			return nil, cause
		}
		next := req
		next.skip = append(slices.Clip(req.skip), t.String())
		return r.stream(ctx, route, next)
	}
	return s, nil
}

// targetOf finds the route's target (fallbacks included) by provider and
// model.
func (r *Router) targetOf(route, provider, model string) *Target {
	rt, ok := r.routes[route]
	if !ok {
		return nil
	}
	for _, t := range append(rt.Targets[:len(rt.Targets):len(rt.Targets)], fallbacks(rt)...) {
		if t.Provider.Name() == provider && t.Model == model {
			return &t
		}
	}
	return nil
}

// TargetState is one target's breaker and health, for gauges.
type TargetState struct {
	Provider, Model string
	Breaker         breaker.State
	Health          float64
}

// Targets reports every target of every route (fallbacks included), once.
func (r *Router) Targets() []TargetState {
	seen := map[string]bool{}
	var out []TargetState
	for _, rt := range r.routes {
		for _, t := range append(rt.Targets[:len(rt.Targets):len(rt.Targets)], fallbacks(rt)...) {
			p := t.Provider.Name()
			if seen[p+"/"+t.Model] {
				continue
			}
			seen[p+"/"+t.Model] = true
			out = append(out, TargetState{Provider: p, Model: t.Model, Breaker: r.breakers.Get(p, t.Model).State, Health: r.health.Score(p, t.Model)})
		}
	}
	return out
}

// ProbeOpen sends one tiny chat call (one output token) to every target
// whose breaker is open and past its cooldown, as that target's half-open
// probe, so recovery is noticed without waiting for user traffic. A chat
// call, not a list of models: what must recover is the chat endpoint.
func (r *Router) ProbeOpen(ctx context.Context) {
	seen := map[string]bool{}
	for _, rt := range r.routes {
		for _, t := range append(rt.Targets[:len(rt.Targets):len(rt.Targets)], fallbacks(rt)...) {
			name := t.Provider.Name()
			if seen[name+"/"+t.Model] || r.breakers.Get(name, t.Model).Allow(r.now()) != breaker.Probe {
				continue
			}
			seen[name+"/"+t.Model] = true
			req := llmclient.Request{Model: t.Model, MaxTokens: 1, Messages: []llmclient.Message{{Role: "user", Content: "ping"}}}
			_, err := r.attempt(ctx, "probe", t, ask{Request: req}, &RouteError{Route: "probe"})
			r.log.Info("active probe", "provider", name, "model", t.Model, "class", string(retry.ClassOf(err)))
		}
	}
}
