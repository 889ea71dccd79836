package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// RouterOptions configures OpenRouter. Config is required.
type RouterOptions struct {
	Config config.Config
	// Logger receives the router's logs (one line per call), behind the
	// configuration's redactor; nil: discarded.
	Logger *slog.Logger
	// Retries is how many times a route whose every target failed is
	// tried again (after resilience.retry's backoff); nil: the
	// configuration's resilience.retry.max_retries.
	Retries *int
	// Redis, when set, is used instead of connecting to Config.Redis.
	Redis redis.UniversalClient
	// Transport carries LLM calls; nil: llmclient's default.
	Transport http.RoundTripper
}

// Router is the worker's router, built by the same builder, on its own:
// the configured routes as providers for a program that runs no
// workflow, sharing keys, breakers, health scores, limits and budgets
// with every worker on the same Redis. Close it when done.
type Router struct {
	built   *app.App
	retries router.Retries
}

// OpenRouter connects to Redis and builds the router of o.Config, as a
// worker does (its state loaded, its refreshes and probes running until
// Close).
func OpenRouter(ctx context.Context, o RouterOptions) (*Router, error) {
	cfg := o.Config
	if len(cfg.Providers) == 0 || len(cfg.Routes) == 0 {
		return nil, &config.FieldError{Field: "routes", Msg: "a router needs at least one provider and one route in its configuration"}
	}
	re := router.Retries{Max: retry.DefaultMaxRetries, Backoff: cfg.Resilience.Retry.Backoff()}
	if n := cfg.Resilience.Retry.MaxRetries; n != nil {
		re.Max = *n
	}
	if o.Retries != nil {
		re.Max = *o.Retries
	}
	if re.Max < 0 {
		return nil, fmt.Errorf("router retries: %d must not be negative", re.Max)
	}
	built, err := app.Build(ctx, cfg, app.Options{Logger: o.Logger, Redis: o.Redis}, app.Router(app.RouterOptions{Transport: o.Transport}))
	if err != nil {
		return nil, err
	}
	return &Router{built: built, retries: re}, nil
}

// ErrUnknownRoute is returned by Provider for a route the configuration
// does not name.
var ErrUnknownRoute = errors.New("unknown route")

// Provider is the named route as an llmclient.Provider (router.Provider).
func (r *Router) Provider(route string) (llmclient.Provider, error) {
	if _, ok := r.built.Router.Route(route); !ok {
		return nil, fmt.Errorf("%w %q (the configuration's routes: %v)", ErrUnknownRoute, route, r.built.Config.RouteNames())
	}
	return r.built.Router.Provider(route, r.retries)
}

// Close stops the router's background work and closes the Redis client
// OpenRouter opened. Calls under way may fail after it.
func (r *Router) Close() error { return r.built.Close() }
