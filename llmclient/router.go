package llmclient

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/agentq/agentq/retry"
)

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
}

// Observer hears about every call the router makes; metrics hang here.
// The zero value of RouterOptions uses a no-op observer.
type Observer interface {
	Call(route string, t Target, key string, class retry.Class, dur time.Duration, usage Usage)
	Fallback(route, from, to string)
}

// RouterOptions configures a Router.
type RouterOptions struct {
	Logger   *slog.Logger     // nil: discard
	Observer Observer         // nil: none
	Now      func() time.Time // nil: time.Now
}

// Router sends a request along a route: the first target that answers
// wins; on failure it moves on at once (it never sleeps: delayed retries
// belong to the task queue). Keys are rotated on key-level failures.
type Router struct {
	routes map[string]Route
	log    *slog.Logger
	obs    Observer
	now    func() time.Time
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
// was canceled, a non-retryable class if every attempt had one (the request
// itself is bad), else the last retryable class.
func (e *RouteError) Class() retry.Class {
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

// RetryAfter is the earliest wait a provider asked for, or zero.
func (e *RouteError) RetryAfter() time.Duration {
	var d time.Duration
	for _, a := range e.Attempts {
		if pe, ok := AsError(a); ok && pe.RetryAfter > 0 && (d == 0 || pe.RetryAfter < d) {
			d = pe.RetryAfter
		}
	}
	return d
}

// Chat sends req along the named route. req.Model is set per target.
func (r *Router) Chat(ctx context.Context, route string, req Request) (*Response, error) {
	rt, ok := r.routes[route]
	if !ok {
		return nil, fmt.Errorf("llmclient: unknown route %q", route)
	}
	rerr := &RouteError{Route: route}
	for i := 0; i < len(rt.Targets); i++ {
		t := rt.Targets[i]
		resp, err := r.callTarget(ctx, route, t, req, rerr)
		if err == nil {
			if i > 0 {
				r.obs.Fallback(route, rt.Targets[0].String(), t.String())
			}
			return resp, nil
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

// callTarget calls one target, moving to the provider's next key on a
// key-level failure (rate limit, quota, auth) until every key was tried.
func (r *Router) callTarget(ctx context.Context, route string, t Target, req Request, rerr *RouteError) (*Response, error) {
	keys := 1
	if k, ok := t.Provider.(interface{ KeyFingerprints() []string }); ok {
		keys = max(1, len(k.KeyFingerprints()))
	}
	req.Model = t.Model
	var err error
	for k := 0; k < keys; k++ {
		var resp *Response
		resp, err = r.call(WithKey(ctx, k), route, t, req)
		if err == nil {
			return resp, nil
		}
		rerr.Attempts = append(rerr.Attempts, err)
		switch ClassOf(err) {
		case retry.RateLimited, retry.Quota, retry.Auth:
			continue
		}
		return nil, err
	}
	return nil, err
}

// call makes one call with min(target timeout, time left) and logs it.
func (r *Router) call(ctx context.Context, route string, t Target, req Request) (*Response, error) {
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
	defer cancel()
	start := r.now()
	resp, err := t.Provider.Chat(cctx, req)
	dur := r.now().Sub(start)
	class, key, usage := retry.OK, "", Usage{}
	if err != nil {
		class = ClassOf(err)
		if e, ok := AsError(err); ok {
			key = e.Key
		}
	} else {
		key, usage = resp.Key, resp.Usage
	}
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
