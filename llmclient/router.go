package llmclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentq/agentq/retry"
)

var tracer = otel.Tracer("github.com/agentq/agentq/llmclient")

// Target is one provider and model a route may use.
type Target struct {
	Provider Provider
	Model    string
	// Timeout bounds one call to this target; the attempt's own deadline
	// bounds it too. Zero means only the attempt's deadline.
	Timeout time.Duration
}

func (t Target) String() string { return t.Provider.Name() + "/" + t.Model }

// Route is an ordered list of targets and what to do when they fail.
type Route struct {
	Name                  string
	Targets               []Target
	ContextWindowFallback *Target
	ContentFallback       *Target
	// FallbackText answers steps that accept a degraded answer.
	FallbackText string
	// Strategy is "health" (default: best score first, close scores share
	// traffic) or "ordered" (the configured order).
	Strategy string
	// Hedging: when the first target has not answered after HedgeAfter
	// (or, with HedgeQuantile 0.95 or 0.99, after that quantile of its
	// latency), a second call goes to the next target; the first answer
	// wins and the other call is canceled. Zero for both: no hedging.
	HedgeAfter    time.Duration
	HedgeQuantile float64
}

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

// Observer hears about every call the router makes; metrics hang here.
// The zero value of RouterOptions uses a no-op observer.
type Observer interface {
	Call(route string, t Target, key string, class retry.Class, dur time.Duration, usage Usage)
	Fallback(route, from, to string)
	// KeyEvent reports "cooldown", "disabled" or "rotated" (the next key
	// was tried) for a key named by its fingerprint.
	KeyEvent(provider, key, event string)
}

// RouterOptions configures a Router. The zero value works.
type RouterOptions struct {
	Logger   *slog.Logger     // nil: discard
	Observer Observer         // nil: none
	Now      func() time.Time // nil: time.Now
	// Keys holds key cooldowns and disables; nil: a local-only pool.
	Keys *KeyPools
	// DefaultCooldown cools a rate-limited key that sent no Retry-After;
	// 0 means 10s.
	DefaultCooldown time.Duration
	// MaxCooldown caps any key cooldown; 0 means 60s.
	MaxCooldown time.Duration
	// Breakers holds the targets' circuit breakers; nil: local-only
	// breakers with retry.DefaultBreakerConfig.
	Breakers *Breakers
	// Health scores targets for the "health" strategy; nil: local-only
	// scoring with the default window and weights.
	Health *Health
	// Random feeds the weighted choice among close targets; nil: math/rand/v2.
	Random func() float64
	// Limits are providers' cluster-wide caps, enforced by Limiter (both
	// needed; a provider without an entry has no caps).
	Limits  map[string]Limit
	Limiter Limiter
}

// Limit caps a provider's calls across all workers; zero fields: no cap.
type Limit struct{ MaxConcurrency, RPM int }

// Limiter takes a slot for one call to a provider: a concurrency lease
// (released after the call, or lapsing after lease) and a request in the
// sliding minute. ok false: a limit is full for about wait.
type Limiter interface {
	Acquire(ctx context.Context, provider string, maxConcurrency, rpm int, lease time.Duration) (release func(context.Context), wait time.Duration, ok bool, err error)
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
		r.breakers = NewBreakers(nil, retry.DefaultBreakerConfig, r.now, nil, r.log)
	}
	r.health, r.random, r.limits, r.limiter = o.Health, o.Random, o.Limits, o.Limiter
	if r.health == nil {
		r.health = NewHealth(nil, HealthConfig{}, r.now, r.log)
	}
	if r.random == nil {
		r.random = rand.Float64
	}
	if r.defCool <= 0 {
		r.defCool = 10 * time.Second
	}
	if r.maxCool <= 0 {
		r.maxCool = time.Minute
	}
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

// RouteError is the failure of every target of a route in one attempt.
type RouteError struct {
	Route    string
	Attempts []error // one per call, in order; each usually an *Error
}

func (e *RouteError) Error() string {
	parts := make([]string, len(e.Attempts))
	for i, a := range e.Attempts {
		parts[i] = a.Error()
	}
	return fmt.Sprintf("route %s: %d call(s) failed: %s", e.Route, len(e.Attempts), strings.Join(parts, "; "))
}

// Unwrap exposes the attempts to errors.Is/As.
func (e *RouteError) Unwrap() []error { return e.Attempts }

// Class is the class that decides what happens next: canceled if the call
// was canceled; the request's own fault (bad_request, context_length,
// content_filter) if the route stopped on one, even after another key or
// target failed for a reason of its own; a non-retryable class if every
// attempt had one; else the last retryable class.
func (e *RouteError) Class() retry.Class {
	if n := len(e.Attempts); n > 0 {
		if c := ClassOf(e.Attempts[n-1]); c.RequestFault() {
			for _, a := range e.Attempts {
				if ClassOf(a) == retry.Canceled {
					return retry.Canceled
				}
			}
			return c
		}
	}
	var last retry.Class = retry.Network
	allFinal := len(e.Attempts) > 0
	for _, a := range e.Attempts {
		c := ClassOf(a)
		if c == retry.Canceled {
			return c
		}
		if c.Retryable() {
			allFinal = false
			last = c
		}
	}
	if allFinal {
		return ClassOf(e.Attempts[len(e.Attempts)-1])
	}
	return last
}

// RetryAfter is the earliest a retry can expect a key to be usable: the
// shortest Retry-After a provider sent, or the earliest end of a key
// cooldown that kept a target from being called; zero if neither.
func (e *RouteError) RetryAfter(now time.Time) time.Duration {
	var d time.Duration
	take := func(x time.Duration) {
		if x > 0 && (d == 0 || x < d) {
			d = x
		}
	}
	for _, a := range e.Attempts {
		var sk *SkippedError
		if errors.As(a, &sk) && !sk.Until.IsZero() {
			take(sk.Until.Sub(now))
		} else if pe, ok := AsError(a); ok {
			take(pe.RetryAfter)
		}
	}
	return d
}

// SkippedError is a target the router did not call, and why: its breaker
// is open, every key of its provider is cooling or disabled, or its
// provider is at its max_concurrency/rpm limit.
type SkippedError struct {
	Target string    // provider/model
	Reason string    // e.g. "circuit open"
	Until  time.Time // when it may be callable again; zero: when a person acts
	class  retry.Class
}

func (e *SkippedError) Error() string {
	if e.Until.IsZero() {
		return fmt.Sprintf("%s: %s; not called", e.Target, e.Reason)
	}
	return fmt.Sprintf("%s: %s until %s; not called", e.Target, e.Reason, e.Until.UTC().Format(time.RFC3339Nano))
}

// Class is what the skip means for the step: server for an open circuit
// (the target is failing), rate_limited for cooling keys and full limits
// (waiting cures it), auth when every key is disabled.
func (e *SkippedError) Class() retry.Class { return e.class }

// Reasons a target is skipped.
const (
	SkipBreakerOpen  = "circuit open"
	SkipKeysCooling  = "every key is cooling down"
	SkipKeysDisabled = "every key is disabled (auth or quota); re-enable with `enqueue keys enable`"
	SkipLimited      = "at its provider's max_concurrency/rpm limit"
)

// AuthProbeError is a failure (a 500 with an empty body) that an auth
// probe showed to be a rejected key.
type AuthProbeError struct{ Err error }

func (e *AuthProbeError) Error() string {
	return e.Err.Error() + " (an auth probe confirmed the key is rejected)"
}
func (e *AuthProbeError) Unwrap() error      { return e.Err }
func (e *AuthProbeError) Class() retry.Class { return retry.Auth }

// Chat sends req along the named route. req.Model is set per target.
func (r *Router) Chat(ctx context.Context, route string, req Request) (*Response, error) {
	rt, ok := r.routes[route]
	if !ok {
		return nil, fmt.Errorf("llmclient: unknown route %q", route)
	}
	rerr := &RouteError{Route: route}
	var buf [8]int
	order := r.health.order(rt.Targets, rt.Strategy, r.random, buf[:0])
	for n := 0; n < len(order); n++ {
		t := rt.Targets[order[n]]
		var (
			resp *Response
			err  error
		)
		// structured-output calls are not hedged: a repair goes to the
		// target that gave the invalid answer
		if delay := r.hedgeDelay(rt, t); delay > 0 && n+1 < len(order) && !req.stream && req.Output == nil {
			var won int
			resp, won, err = r.hedged(ctx, route, rt, order[n], order[n+1], req, delay, rerr)
			if err == nil {
				if won != order[0] || n > 0 {
					r.obs.Fallback(route, rt.Targets[order[0]].String(), rt.Targets[won].String())
				}
				return resp, nil
			}
			if won >= 0 {
				n++ // both were tried
			}
		} else if resp, err = r.callTarget(ctx, route, t, req, rerr); err == nil {
			if n > 0 {
				r.obs.Fallback(route, rt.Targets[order[0]].String(), t.String())
			}
			return resp, nil
		} else if inv := (*InvalidOutputError)(nil); errors.As(err, &inv) {
			// one repair on the same target, told what was wrong; then the next target
			if resp, err = r.callTarget(ctx, route, t, repairRequest(req, inv), rerr); err == nil {
				if n > 0 {
					r.obs.Fallback(route, rt.Targets[order[0]].String(), t.String())
				}
				return resp, nil
			}
		}
		switch class := ClassOf(err); class {
		case retry.Canceled, retry.BadRequest:
			return nil, rerr
		case retry.ContextLength, retry.ContentFilter:
			// the request, not the target, is the problem: only the route's
			// fallback for this class can help
			fb := rt.ContextWindowFallback
			if class == retry.ContentFilter {
				fb = rt.ContentFallback
			}
			if fb != nil {
				if resp, err := r.callTarget(ctx, route, *fb, req, rerr); err == nil {
					r.obs.Fallback(route, t.String(), fb.String())
					return resp, nil
				}
			}
			return nil, rerr
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, rerr
}

// ChatStream sends req along the named route and returns the first
// target's stream that starts answering; a target that fails before its
// first piece is handled like a failed call (breaker, keys, next target).
// Streams are not hedged: the first piece decides.
func (r *Router) ChatStream(ctx context.Context, route string, req Request) (*Stream, error) {
	req.stream = true
	resp, err := r.Chat(ctx, route, req)
	if err != nil {
		return nil, err
	}
	return resp.stream, nil
}

// Provider returns the route as a Provider: the resilient router composes
// with anything that takes one (Koog's ResilientExecutor wraps a
// PromptExecutor the same way). Request.Model is ignored: the route picks.
func (r *Router) Provider(route string) (Provider, error) {
	if _, ok := r.routes[route]; !ok {
		return nil, fmt.Errorf("llmclient: unknown route %q", route)
	}
	return routeProvider{r: r, route: route}, nil
}

type routeProvider struct {
	r     *Router
	route string
}

func (p routeProvider) Name() string { return "route:" + p.route }
func (p routeProvider) Chat(ctx context.Context, req Request) (*Response, error) {
	return p.r.Chat(ctx, p.route, req)
}
func (p routeProvider) ChatStream(ctx context.Context, req Request) (*Stream, error) {
	return p.r.ChatStream(ctx, p.route, req)
}

// TargetState is one target's breaker and health, for gauges.
type TargetState struct {
	Provider, Model string
	Breaker         retry.BreakerState
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
			if seen[name+"/"+t.Model] || r.breakers.Get(name, t.Model).Allow(r.now()) != retry.Probe {
				continue
			}
			seen[name+"/"+t.Model] = true
			req := Request{Model: t.Model, MaxTokens: 1, Messages: []Message{{Role: "user", Content: "ping"}}}
			_, err := r.callTarget(ctx, "probe", t, req, &RouteError{Route: "probe"})
			r.log.Info("active probe", "provider", name, "model", t.Model, "class", string(ClassOf(err)))
		}
	}
}

func fallbacks(rt Route) []Target {
	var out []Target
	for _, f := range []*Target{rt.ContextWindowFallback, rt.ContentFallback} {
		if f != nil {
			out = append(out, *f)
		}
	}
	return out
}

// hedged calls target a; if it has not answered after delay, also target
// b. The first answer wins and the other call is canceled (its log line
// and breaker record say canceled). It returns the winner's index, or -1
// when a failed before the hedge went out (so b was not tried).
func (r *Router) hedged(ctx context.Context, route string, rt Route, a, b int, req Request, delay time.Duration, rerr *RouteError) (*Response, int, error) {
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		resp     *Response
		err      error
		idx      int
		attempts []error
	}
	ch := make(chan result, 2)
	launch := func(i int) {
		go func() {
			sub := &RouteError{}
			resp, err := r.callTarget(hctx, route, rt.Targets[i], req, sub)
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
			if ClassOf(res.err).RequestFault() {
				return nil, res.idx, res.err
			}
		}
	}
	return nil, b, last
}

// callTarget calls one target with the provider's usable keys in turn:
// on a key-level failure it cools (rate limit) or disables (quota, auth)
// the key for every worker and tries the next key at once.
func (r *Router) callTarget(ctx context.Context, route string, t Target, req Request, rerr *RouteError) (*Response, error) {
	req.Model = t.Model
	name := t.Provider.Name()
	allowed, probe := r.breakers.allow(ctx, name, t.Model)
	if !allowed {
		err := &SkippedError{Target: t.String(), Reason: SkipBreakerOpen, Until: r.breakers.Get(name, t.Model).OpenUntil, class: retry.Server}
		rerr.Attempts = append(rerr.Attempts, err)
		return nil, err
	}
	kp, ok := t.Provider.(interface{ KeyIDs() []string })
	if !ok {
		release, err := r.acquire(ctx, name, t)
		if err != nil {
			rerr.Attempts = append(rerr.Attempts, err)
			return nil, err
		}
		resp, err := r.call(ctx, route, t, req, probe)
		releaseAfter(resp, release)
		if err != nil {
			rerr.Attempts = append(rerr.Attempts, err)
		}
		return resp, err
	}
	ids := kp.KeyIDs()
	var (
		err         error
		earliest    time.Time
		allDisabled = true
		tried       bool
	)
	for k, id := range ids {
		ok, until, disabled := r.keys.check(name, id, r.now())
		if !ok {
			allDisabled = allDisabled && disabled
			if !disabled && (earliest.IsZero() || until.Before(earliest)) {
				earliest = until
			}
			continue
		}
		if tried {
			r.obs.KeyEvent(name, fingerprintOf(t.Provider, k), "rotated")
		}
		allDisabled, tried = false, true
		release, lerr := r.acquire(ctx, name, t)
		if lerr != nil {
			if probe {
				r.breakers.record(ctx, name, t.Model, retry.Canceled, true) // give the probe slot back
			}
			rerr.Attempts = append(rerr.Attempts, lerr)
			return nil, lerr
		}
		kctx := WithKey(ctx, k)
		var resp *Response
		resp, err = r.call(kctx, route, t, req, probe)
		releaseAfter(resp, release)
		if err == nil {
			return resp, nil
		}
		err = r.probeEmpty500(kctx, t, err)
		rerr.Attempts = append(rerr.Attempts, err)
		switch class := ClassOf(err); class {
		case retry.RateLimited:
			wait := r.defCool
			if e, ok := AsError(err); ok && e.RetryAfter > 0 {
				wait = e.RetryAfter
			}
			until := r.now().Add(min(wait, r.maxCool))
			r.keys.Cool(ctx, name, id, until)
			r.obs.KeyEvent(name, fingerprintOf(t.Provider, k), "cooldown")
			if earliest.IsZero() || until.Before(earliest) {
				earliest = until
			}
		case retry.Quota, retry.Auth:
			r.keys.Disable(ctx, name, id, string(class)+": "+oneLine(err.Error(), 200))
			r.obs.KeyEvent(name, fingerprintOf(t.Provider, k), "disabled")
			r.log.Error("API key disabled for every worker until re-enabled", "provider", name,
				"key", fingerprintOf(t.Provider, k), "class", string(class), "alert", true)
		default:
			return nil, err
		}
	}
	if !tried {
		if probe {
			r.breakers.record(ctx, name, t.Model, retry.Canceled, true) // give the probe slot back
		}
		err = &SkippedError{Target: t.String(), Reason: SkipKeysCooling, Until: earliest, class: retry.RateLimited}
		if allDisabled {
			err = &SkippedError{Target: t.String(), Reason: SkipKeysDisabled, class: retry.Auth}
		}
		rerr.Attempts = append(rerr.Attempts, err)
	}
	return nil, err
}

// releaseAfter gives a limit slot back now, or when a streamed answer is
// closed.
func releaseAfter(resp *Response, release func()) {
	if resp != nil && resp.stream != nil {
		resp.stream.onClose(release)
		return
	}
	release()
}

// acquire takes a slot under the provider's cluster-wide limits, if it has
// any. A limiter that cannot be reached lets the call go (and says so):
// Redis trouble must not stop every call.
func (r *Router) acquire(ctx context.Context, provider string, t Target) (func(), error) {
	lim, ok := r.limits[provider]
	if !ok || r.limiter == nil || (lim.MaxConcurrency <= 0 && lim.RPM <= 0) {
		return func() {}, nil
	}
	lease := t.Timeout + 10*time.Second
	release, wait, ok, err := r.limiter.Acquire(ctx, provider, lim.MaxConcurrency, lim.RPM, lease)
	if err != nil {
		r.log.Warn("limits unavailable; sending the call anyway", "provider", provider, "err", err)
		return func() {}, nil
	}
	if !ok {
		// a lease usually ends long before it would lapse: look again soon
		return nil, &SkippedError{Target: t.String(), Reason: SkipLimited, Until: r.now().Add(min(wait, time.Second)), class: retry.RateLimited}
	}
	return func() { release(context.WithoutCancel(ctx)) }, nil
}

// probeEmpty500 asks the provider, for a 500 with an empty body, whether
// the key is rejected: some providers and proxies hide auth failures so.
func (r *Router) probeEmpty500(ctx context.Context, t Target, err error) error {
	e, ok := AsError(err)
	p, canProbe := t.Provider.(interface{ Probe(context.Context) error })
	if !ok || !canProbe || e.Status != 500 || strings.TrimSpace(e.Body) != "" {
		return err
	}
	perr := p.Probe(ctx)
	r.log.Info("auth probe after an empty 500", "provider", t.Provider.Name(), "key", e.Key, "probe_class", string(ClassOf(perr)))
	if ClassOf(perr) == retry.Auth {
		return &AuthProbeError{Err: err}
	}
	return err
}

func fingerprintOf(p Provider, k int) string {
	if f, ok := p.(interface{ KeyFingerprints() []string }); ok {
		if fps := f.KeyFingerprints(); k < len(fps) {
			return fps[k]
		}
	}
	return ""
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// openStream opens a stream and waits for its first piece, so that a
// target that fails before answering is treated like a failed call (the
// route moves on). The stream owns cancel from then on (Close runs it).
func openStream(ctx context.Context, p Provider, req Request, cancel context.CancelFunc) (*Response, error) {
	st, err := p.ChatStream(ctx, req)
	if err != nil {
		cancel()
		return nil, err
	}
	first, err := st.Recv()
	switch {
	case err == nil:
		st.unread(first)
	case errors.Is(err, io.EOF): // an empty answer, already complete
	default:
		st.Close()
		cancel()
		return nil, err
	}
	st.onClose(cancel)
	k, _ := ctx.Value(keyCtx{}).(int)
	return &Response{Provider: p.Name(), Model: req.Model, Key: fingerprintOf(p, k), stream: st}, nil
}

// call makes one call with min(target timeout, time left), records it in
// the target's breaker and logs it. A streamed call counts as answered
// once its first piece arrives.
func (r *Router) call(ctx context.Context, route string, t Target, req Request, probe bool) (*Response, error) {
	timeout := t.Timeout
	if dl, ok := ctx.Deadline(); ok {
		if left := dl.Sub(r.now()); timeout == 0 || left < timeout {
			timeout = left
		}
	}
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, timeout)
	}
	cctx, span := tracer.Start(cctx, "agentq.llm_call", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("agentq.route", route), attribute.String("agentq.provider", t.Provider.Name()),
			attribute.String("agentq.model", t.Model), attribute.Int("agentq.input_len", inputLen(req))))
	defer span.End()
	start := r.now()
	var (
		resp *Response
		err  error
	)
	if req.stream {
		resp, err = openStream(cctx, t.Provider, req, cancel)
	} else {
		resp, err = t.Provider.Chat(cctx, req)
		cancel()
	}
	dur := r.now().Sub(start)
	class, key, usage := retry.OK, "", Usage{}
	if err == nil {
		key, usage = resp.Key, resp.Usage
		if verr := checkOutput(req, resp); verr != nil {
			err, resp = &InvalidOutputError{Target: t.String(), Err: verr, Output: resp.Text}, nil
		}
	}
	if err != nil {
		class = ClassOf(err)
		if e, ok := AsError(err); ok {
			key = e.Key
		}
	}
	span.SetAttributes(attribute.String("agentq.key", key), attribute.String("agentq.class", string(class)),
		attribute.Int("agentq.tokens.prompt", usage.PromptTokens), attribute.Int("agentq.tokens.completion", usage.CompletionTokens))
	if err != nil {
		span.SetStatus(codes.Error, string(class))
	}
	r.breakers.record(ctx, t.Provider.Name(), t.Model, class, probe)
	r.health.observe(t.Provider.Name(), t.Model, class, dur)
	r.obs.Call(route, t, key, class, dur, usage)
	r.log.LogAttrs(ctx, slog.LevelInfo, "llm_call",
		slog.String("route", route), slog.String("provider", t.Provider.Name()), slog.String("model", t.Model),
		slog.String("key", key), slog.Int("input_len", inputLen(req)), slog.Duration("timeout", timeout),
		slog.String("class", string(class)), slog.Duration("dur", dur))
	return resp, err
}

func inputLen(req Request) int {
	n := len(req.System)
	for _, m := range req.Messages {
		n += len(m.Content)
	}
	return n
}

type nopObserver struct{}

func (nopObserver) Call(string, Target, string, retry.Class, time.Duration, Usage) {}
func (nopObserver) Fallback(string, string, string)                                {}
func (nopObserver) KeyEvent(string, string, string)                                {}
