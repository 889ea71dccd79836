package app

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/metrics"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// RouterOptions tune the Router part. The zero value is production's.
type RouterOptions struct {
	// Transport carries LLM calls; nil: a copy of http.DefaultTransport
	// that keeps the worker's concurrency (at least 256) of idle
	// connections per host (llmclient.Options.IdleConnsPerHost).
	Transport http.RoundTripper
	// Random feeds the breakers' jitter; nil: math/rand/v2.
	Random func() float64
	// Observer hears every call the router makes, after the metrics; nil:
	// the metrics only.
	Observer router.Observer
}

// Router makes App.Router, App.Metrics and App.Health: one adapter per
// configured provider, the key pools, breakers and health scores shared
// with the other workers through Redis (local copies refreshed every
// second, and at once when another worker announces a change), the
// cluster-wide limits, and the router over the configured routes. Its
// background work (refreshes, probes of open breakers) runs until Close.
func Router(o RouterOptions) Part {
	return Part{name: "Router", build: func(ctx context.Context, a *App) error { return a.buildRouter(ctx, o) }}
}

// stateRefresh is how often a worker reloads the shared key and breaker
// state without being told of a change.
const stateRefresh = 5 * time.Second

func (a *App) buildRouter(ctx context.Context, o RouterOptions) error {
	cfg, rdb, log := a.Config, a.Redis, a.Logger
	providers, err := buildProviders(cfg, o.Transport, a)
	if err != nil {
		return err
	}
	keys := router.NewKeyPools(KeyStore{KeyState: store.NewKeyState(rdb, nil)}, nil, log)
	// the providers' and the MCP servers' breakers (one rule set; a probe
	// slot lapses after twice the longest provider timeout: an MCP call
	// longer than that may find a second probe sent beside it)
	breakers := router.NewBreakers(store.NewBreakers(rdb), cfg.Resilience.Breaker.Config(2*maxProviderTimeout(cfg)), nil, o.Random, log)
	a.CallBreakers = breakers
	names := make([]string, 0, len(providers))
	for n := range providers {
		names = append(names, n)
	}
	// the MCP servers' breakers are shared beside the providers'
	breakerNames := slices.Clip(names)
	for _, s := range cfg.MCPServerNames() {
		breakerNames = append(breakerNames, config.MCPBreaker(s))
	}
	bg := a.backgroundContext(ctx)
	pokeKeys, pokeBreakers := make(chan struct{}, 1), make(chan struct{}, 1)
	poke := func(ch chan struct{}) {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	// subscribed before the first refresh, so no change is missed between
	if err := store.Subscribe(bg, rdb, func(channel, _ string) {
		if channel == store.KeyChanges {
			poke(pokeKeys)
		} else {
			poke(pokeBreakers)
		}
	}, store.KeyChanges, store.BreakerChanges); err != nil {
		return err
	}
	if err := keys.Refresh(ctx, names); err != nil {
		return err
	}
	if err := breakers.Refresh(ctx, breakerNames); err != nil {
		return err
	}
	if a.Health, err = router.NewHealth(HealthStore{HealthStats: store.NewHealthStats(rdb)}, healthConfig(cfg), nil, log); err != nil {
		return err
	}
	a.background(bg, func(ctx context.Context) { a.Health.Run(ctx, names, time.Second) })
	// a change to keys or breakers is published (the pokes): the refresh
	// every few seconds is the safety net for a message lost to a reconnect
	a.background(bg, func(ctx context.Context) { keys.Run(ctx, names, stateRefresh, pokeKeys) })
	a.background(bg, func(ctx context.Context) { breakers.Run(ctx, breakerNames, stateRefresh, pokeBreakers) })
	a.Metrics = metrics.New(a.inspector(), func() []metrics.TargetState {
		var out []metrics.TargetState
		for _, t := range a.Router.Targets() {
			out = append(out, metrics.TargetState{Provider: t.Provider, Model: t.Model, Breaker: t.Breaker, Health: t.Health})
		}
		return out
	})
	a.Metrics.SetPrices(Prices(cfg))
	a.Metrics.WatchKeptSignals(store.New(rdb, cfg.Retention.D(), nil).KeptSignalCount)
	obs := observers{a.Metrics}
	if o.Observer != nil {
		obs = append(obs, o.Observer)
	}
	routes, err := buildRoutes(cfg, providers)
	if err != nil {
		return err
	}
	a.Router, err = router.NewRouter(routes, router.RouterOptions{Logger: log, Observer: obs, Keys: keys, Breakers: breakers, Health: a.Health,
		Limits: limits(cfg), Limiter: store.NewLimits(rdb, nil), Budgets: routerBudgets(cfg, rdb, a.Metrics),
		DefaultCooldown: cfg.Resilience.Keys.DefaultCooldown.D(), MaxCooldown: cfg.Resilience.Keys.MaxCooldown.D()})
	if err != nil {
		return err
	}
	a.background(bg, func(ctx context.Context) {
		t := time.NewTicker(cfg.Resilience.Breaker.ProbeInterval.D())
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				a.Router.ProbeOpen(ctx)
			}
		}
	})
	return nil
}

// buildProviders makes one adapter per configured provider; every
// provider's text loses every secret a's redactor knows, not only its own
// keys.
func buildProviders(cfg config.Config, transport http.RoundTripper, a *App) (map[string]llmclient.Provider, error) {
	out := map[string]llmclient.Provider{}
	for _, p := range cfg.Providers {
		keys := make([]string, len(p.Keys))
		for i, k := range p.Keys {
			keys[i] = k.Reveal()
		}
		if len(keys) == 0 {
			keys = []string{"none"} // a local model without auth
		}
		roots, err := p.RootCAs()
		if err != nil {
			return nil, fmt.Errorf("provider %s: %w", p.Name, err)
		}
		// the shared transport keeps a worker's concurrency of idle
		// connections per provider: a slot's next call finds one
		o := llmclient.Options{Name: p.Name, BaseURL: p.BaseURL, Keys: keys, Transport: transport, RootCAs: roots,
			IdleConnsPerHost: cfg.Worker.Concurrency, MaxResponseBytes: p.MaxResponseBytes, Redactor: a.Redactor}
		pr, err := llmclient.NewProvider(p.Kind, o)
		if err != nil {
			return nil, fmt.Errorf("provider %s: %w", p.Name, err)
		}
		out[p.Name] = pr
	}
	return out, nil
}

// buildRoutes turns the configured routes into the router's.
func buildRoutes(cfg config.Config, providers map[string]llmclient.Provider) ([]router.Route, error) {
	target := func(t config.Target) router.Target {
		p, _ := cfg.Provider(t.Provider)
		return router.Target{Provider: providers[t.Provider], Model: t.Model, Timeout: p.Timeout.D(), MaxInputBytes: t.MaxInputBytes}
	}
	var routes []router.Route
	for _, name := range cfg.RouteNames() {
		rc := cfg.Routes[name]
		r := router.Route{Name: name, FallbackText: rc.FallbackText, Strategy: rc.Strategy}
		var err error
		if r.HedgeQuantile, r.HedgeAfter, err = rc.Hedge(); err != nil {
			return nil, fmt.Errorf("routes.%s.hedge_after: %w", name, err) // validated at load
		}
		for _, t := range rc.Targets {
			r.Targets = append(r.Targets, target(t))
		}
		if rc.ContextWindowFallback != nil {
			t := target(*rc.ContextWindowFallback)
			r.ContextWindowFallback = &t
		}
		if rc.ContentFallback != nil {
			t := target(*rc.ContentFallback)
			r.ContentFallback = &t
		}
		routes = append(routes, r)
	}
	return routes, nil
}

// limits are the providers' cluster-wide caps.
func limits(cfg config.Config) map[string]router.Limit {
	out := map[string]router.Limit{}
	for _, p := range cfg.Providers {
		if p.MaxConcurrency > 0 || p.RPM > 0 {
			out[p.Name] = router.Limit{MaxConcurrency: p.MaxConcurrency, RPM: p.RPM}
		}
	}
	return out
}

func maxProviderTimeout(cfg config.Config) time.Duration {
	d := time.Minute
	for _, p := range cfg.Providers {
		d = max(d, p.Timeout.D())
	}
	return d
}

// observers fans calls out to several observers.
type observers []router.Observer

func (o observers) Call(route string, t router.Target, key string, class retry.Class, dur time.Duration, u llmclient.Usage) {
	for _, x := range o {
		x.Call(route, t, key, class, dur, u)
	}
}
func (o observers) Fallback(route, from, to string) {
	for _, x := range o {
		x.Fallback(route, from, to)
	}
}
func (o observers) KeyEvent(provider, key, event string) {
	for _, x := range o {
		x.KeyEvent(provider, key, event)
	}
}
