package agentq

import (
	"context"
	"errors"
	"log/slog"

	"github.com/agentq/agentq/internal/worker"
	"github.com/agentq/agentq/llmclient"
)

// Router calls the configured routes from any Go program, with no
// workflow and no worker: each route is an llmclient.Provider (Provider)
// whose calls go through everything a workflow step's calls go through —
// the route's targets in its order (strategy), hedging, key rotation,
// breakers, provider limits (max_concurrency, rpm) and budgets, the
// fallbacks for context length and content — and, when every target
// failed for a reason a later try may cure, the route again after
// resilience.retry's backoff. It is the workers' router, built by the
// same code: keys, breakers, health scores, limits and budgets are shared
// with every worker and every other Router on the same Redis. It is safe
// for concurrent use. Close it when done.
type Router struct {
	r *worker.Router

	// set by the options, for NewRouter
	log     *slog.Logger
	retries *int
}

// RouterOption tunes NewRouter.
type RouterOption func(*Router)

// WithRouterLogger sends the router's logs (a line per call, with its
// target, key fingerprint, class and duration) to l; default: discarded.
// Secrets of the configuration never reach it.
func WithRouterLogger(l *slog.Logger) RouterOption {
	return func(r *Router) { r.log = l }
}

// WithRouterRetries sets how many times a call tries its route again
// after every target failed (default: resilience.retry.max_retries); 0:
// never. The waits follow resilience.retry's backoff, or a provider's
// Retry-After when longer; a wait that would outlast the call's context
// is not begun. Waits for rate-limited keys use none of the retries, up
// to 3 × (n+1) tries in all.
func WithRouterRetries(n int) RouterOption {
	return func(r *Router) { r.retries = &n }
}

// ErrUnknownRoute is returned (match it with errors.Is) by
// Router.Provider for a route the configuration does not name.
var ErrUnknownRoute = worker.ErrUnknownRoute

// NewRouter connects to cfg's Redis and builds the router of cfg's
// providers and routes, as a worker does: it loads the shared key and
// breaker states, and until Close refreshes them (at once when another
// process changes one), records its calls in the shared health scores and
// probes open breakers past their cooldown. cfg needs at least one
// provider and one route.
func NewRouter(ctx context.Context, cfg Config, opts ...RouterOption) (*Router, error) {
	if cfg.c == nil {
		return nil, errors.New("agentq: NewRouter: the Config is empty (use LoadConfig or ParseConfig)")
	}
	r := &Router{}
	for _, opt := range opts {
		opt(r)
	}
	var err error
	if r.r, err = worker.OpenRouter(ctx, worker.RouterOptions{Config: *cfg.c, Logger: r.log, Retries: r.retries}); err != nil {
		return nil, err
	}
	return r, nil
}

// Provider returns the named route as an llmclient.Provider, for any code
// that takes one. Its Name is "route:" and the route's name; each
// Response names the provider and model that answered. Request.Model is
// not used: each target names its model.
//
// Chat returns the first answer a target gives, on the terms above.
// ChatStream returns the stream of the first target whose stream starts
// answering: a target that fails before its first piece counts as a
// failed call and the route goes on, but a stream that fails after it
// ends with that target's error (its breaker and health score hear of
// it), since a Provider's caller cannot be told that the text starts
// again. Streams are not hedged.
func (r *Router) Provider(route string) (llmclient.Provider, error) {
	return r.r.Provider(route)
}

// Close stops the router's background work and closes its Redis
// connections. Calls under way may fail after it.
func (r *Router) Close() error { return r.r.Close() }
