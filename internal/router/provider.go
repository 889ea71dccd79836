package router

// A route as an llmclient.Provider, for code that takes one and runs no
// workflow: every call goes through the router's policies, and a route
// whose every target failed is tried again in process, after the
// configured backoff, where a worker would leave that to the task queue.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// Retries is how a route used as a Provider tries again when every target
// failed for a reason a later try may cure (a retryable class): what the
// task queue's delayed retries are to a step.
type Retries struct {
	// Max is how many tries follow the first; zero: none. A wait for
	// rate-limited keys uses none of them, up to 3 × (Max+1) tries in all,
	// as for a step.
	Max int
	// Backoff spaces the tries; a provider's Retry-After, or the end of a
	// key's cooldown, makes a wait longer. Required when Max > 0.
	Backoff retry.Backoff
	// Random feeds the backoff's jitter; nil: math/rand/v2.
	Random func() float64
	// Wait waits d, or returns ctx's error when ctx ends first; nil: a
	// timer.
	Wait func(ctx context.Context, d time.Duration) error
}

// Provider returns the named route as an llmclient.Provider. Its Chat is
// Router.Chat; its ChatStream is Router.ChatStream up to the stream's
// first piece (a target that fails before it is a failed call, and the
// route goes on), after which a failure ends the stream with that
// target's error (its breaker and health score hear of it): a Provider's
// caller has no way to be told that the text starts again. Both try the
// route again after re's backoff. Request.Model is not used: each target
// names its model.
func (r *Router) Provider(route string, re Retries) (llmclient.Provider, error) {
	if _, ok := r.routes[route]; !ok {
		return nil, fmt.Errorf("router: unknown route %q", route)
	}
	if re.Max < 0 {
		return nil, fmt.Errorf("router: route %q: retries %d must not be negative", route, re.Max)
	}
	if re.Max > 0 {
		if err := re.Backoff.Validate(); err != nil {
			return nil, fmt.Errorf("router: route %q: %w", route, err)
		}
	}
	if re.Random == nil {
		re.Random = rand.Float64
	}
	if re.Wait == nil {
		re.Wait = wait
	}
	return &routeProvider{r: r, route: route, re: re}, nil
}

// routeProvider is a route as a Provider.
type routeProvider struct {
	r     *Router
	route string
	re    Retries
}

// Name is "route:" and the route's name; each Response names the provider
// that answered.
func (p *routeProvider) Name() string { return "route:" + p.route }

func (p *routeProvider) Chat(ctx context.Context, req llmclient.Request) (*llmclient.Response, error) {
	return tryAgain(ctx, p, func() (*llmclient.Response, error) { return p.r.Chat(ctx, p.route, req) })
}

func (p *routeProvider) ChatStream(ctx context.Context, req llmclient.Request) (*llmclient.Stream, error) {
	return tryAgain(ctx, p, func() (*llmclient.Stream, error) {
		s, err := p.r.stream(ctx, p.route, ask{Request: req, stream: true, endMidway: true})
		if err != nil {
			return nil, err
		}
		return llmclient.StreamFrom(&stickyStream{Stream: s}), nil
	})
}

// stickyStream is a route's stream as a Provider's: once Recv has
// returned io.EOF or an error, it returns the same again (the route's
// stream is not asked again, so its failure is recorded once).
type stickyStream struct {
	*Stream
	err error
}

func (s *stickyStream) Recv() (string, error) {
	if s.err != nil {
		return "", s.err
	}
	piece, err := s.Stream.Recv()
	s.err = err
	return piece, err
}

// tryAgain runs call until it succeeds, fails for a class no retry cures,
// or p's retries are spent; a wait that would outlast ctx is not begun.
// The last failure is returned as it was.
func tryAgain[T any](ctx context.Context, p *routeProvider, call func() (T, error)) (T, error) {
	retried := 0
	for tries := 1; ; tries++ {
		v, err := call()
		if err == nil {
			return v, nil
		}
		class := retry.ClassOf(err)
		free := class == retry.RateLimited && tries < 3*(p.re.Max+1)
		if class == retry.Canceled || ctx.Err() != nil || !class.Retryable() || (!free && retried >= p.re.Max) {
			return v, err
		}
		d := time.Second // a wait for cooling keys with no end in sight
		if p.re.Max > 0 {
			d = p.re.Backoff.Delay(retried, p.re.Random)
		}
		var re *RouteError
		if errors.As(err, &re) {
			d = max(d, re.RetryAfter(p.r.now()))
		}
		if dl, ok := ctx.Deadline(); ok && p.r.now().Add(d).After(dl) {
			return v, err
		}
		if !free {
			retried++
		}
		p.r.log.Info("route failed; trying it again", "route", p.route, "class", string(class), "wait", d, "try", tries+1)
		if werr := p.re.Wait(ctx, d); werr != nil {
			return v, err
		}
	}
}

// wait waits d, or until ctx ends.
func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
