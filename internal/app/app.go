// Package app wires a loaded configuration into the running parts: the
// Redis client, the store, the providers and router, the asynq client.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/redact"
	"github.com/agentq/agentq/tasks"
)

// ErrRedisUnreachable wraps every failure to reach Redis at start.
var ErrRedisUnreachable = errors.New("cannot reach Redis")

// Redis connects to the configured Redis and checks it answers.
func Redis(ctx context.Context, c config.Redis) (redis.UniversalClient, error) {
	opts, err := c.Universal()
	if err != nil {
		return nil, err
	}
	rdb := redis.NewUniversalClient(opts)
	pctx, cancel := context.WithTimeout(ctx, c.DialTimeout.D()+time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("%w at %s: %v", ErrRedisUnreachable, c.Where(), err)
	}
	return rdb, nil
}

// WaitForRedis is Redis, tried again with backoff (0.5s doubling to 10s)
// until Redis answers, up to wait in all (wait ≤ 0: one try) or until ctx
// ends. Each failed try is logged at warn level.
func WaitForRedis(ctx context.Context, c config.Redis, wait time.Duration, log *slog.Logger) (redis.UniversalClient, error) {
	deadline := time.Now().Add(wait)
	delay := 500 * time.Millisecond
	for {
		rdb, err := Redis(ctx, c)
		if err == nil || wait <= 0 {
			return rdb, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, fmt.Errorf("%w (gave up after waiting %s)", err, wait)
		}
		d := min(delay, left)
		log.Warn("Redis is not answering yet; trying again", "in", d, "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (stopped while waiting: %v)", err, ctx.Err())
		case <-time.After(d):
		}
		delay = min(2*delay, 10*time.Second)
	}
}

// Providers builds one adapter per configured provider. transport may be
// nil (http.DefaultTransport).
func Providers(cfg config.Config, transport http.RoundTripper) (map[string]llmclient.Provider, error) {
	out := map[string]llmclient.Provider{}
	red := redact.New(cfg.Secrets()...) // every provider's text loses every secret, not only its own keys
	for _, p := range cfg.Providers {
		keys := make([]string, len(p.Keys))
		for i, k := range p.Keys {
			keys[i] = k.Reveal()
		}
		if len(keys) == 0 {
			keys = []string{"none"} // a local model without auth
		}
		o := llmclient.Options{Name: p.Name, BaseURL: p.BaseURL, Keys: keys, Transport: transport,
			MaxResponseBytes: p.MaxResponseBytes, Redactor: red}
		var (
			pr  llmclient.Provider
			err error
		)
		switch p.Kind {
		case "openai":
			pr, err = llmclient.NewOpenAI(o)
		case "anthropic":
			pr, err = llmclient.NewAnthropic(o)
		default:
			err = fmt.Errorf("unknown kind %q", p.Kind)
		}
		if err != nil {
			return nil, fmt.Errorf("provider %s: %w", p.Name, err)
		}
		out[p.Name] = pr
	}
	return out, nil
}

// KeyStore adapts the store's shared key state to llmclient's interface.
type KeyStore struct{ *store.KeyState }

// Load implements llmclient.KeyStateStore.
func (k KeyStore) Load(ctx context.Context, providers []string) (map[string]map[string]llmclient.KeyStatus, error) {
	st, err := k.KeyState.Load(ctx, providers)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]llmclient.KeyStatus, len(st))
	for p, keys := range st {
		m := make(map[string]llmclient.KeyStatus, len(keys))
		for id, s := range keys {
			m[id] = llmclient.KeyStatus{CoolUntil: s.CoolUntil, Disabled: s.Disabled}
		}
		out[p] = m
	}
	return out, nil
}

// HealthStore adapts the store's health counts to llmclient's interface.
type HealthStore struct{ *store.HealthStats }

// Add implements llmclient.HealthStore.
func (h HealthStore) Add(ctx context.Context, batches []llmclient.HealthBatch, ttl time.Duration) error {
	adds := make([]store.HealthAdd, len(batches))
	for i, b := range batches {
		adds[i] = store.HealthAdd{Provider: b.Provider, Bucket: b.Bucket, Models: b.Models}
	}
	return h.HealthStats.Add(ctx, adds, ttl)
}

// Router builds the router over the configured routes; keys may be nil
// (a local-only key pool).
func Router(cfg config.Config, providers map[string]llmclient.Provider, keys *llmclient.KeyPools, breakers *llmclient.Breakers, health *llmclient.Health, limiter llmclient.Limiter, logger *slog.Logger, obs llmclient.Observer) (*llmclient.Router, error) {
	target := func(t config.Target) llmclient.Target {
		p, _ := cfg.Provider(t.Provider)
		return llmclient.Target{Provider: providers[t.Provider], Model: t.Model, Timeout: p.Timeout.D()}
	}
	var routes []llmclient.Route
	for _, name := range cfg.RouteNames() {
		rc := cfg.Routes[name]
		r := llmclient.Route{Name: name, FallbackText: rc.FallbackText, Strategy: rc.Strategy}
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
	limits := map[string]llmclient.Limit{}
	for _, p := range cfg.Providers {
		if p.MaxConcurrency > 0 || p.RPM > 0 {
			limits[p.Name] = llmclient.Limit{MaxConcurrency: p.MaxConcurrency, RPM: p.RPM}
		}
	}
	return llmclient.NewRouter(routes, llmclient.RouterOptions{Logger: logger, Observer: obs, Keys: keys, Breakers: breakers, Health: health,
		Limits: limits, Limiter: limiter,
		DefaultCooldown: cfg.Resilience.Keys.DefaultCooldown.D(), MaxCooldown: cfg.Resilience.Keys.MaxCooldown.D()})
}

// Clients are the Redis-backed parts the producer commands use.
type Clients struct {
	Redis  redis.UniversalClient
	Client *tasks.Client
}

// Connect opens Redis and builds the producer client on it, checking specs
// against the configured routes (all routes are accepted when none are
// configured: the worker's configuration is the one that counts).
func Connect(ctx context.Context, cfg config.Config) (*Clients, error) {
	rdb, err := Redis(ctx, cfg.Redis)
	if err != nil {
		return nil, err
	}
	return &Clients{Redis: rdb, Client: tasks.NewClient(rdb, ClientOptions(cfg))}, nil
}

// ClientOptions are the producer client's options from a configuration.
func ClientOptions(cfg config.Config) tasks.ClientOptions {
	o := tasks.ClientOptions{Retention: cfg.Retention.D(), MaxRetries: cfg.Resilience.Retry.MaxRetries,
		Limits: tasks.Limits{MaxSteps: cfg.Limits.MaxSteps, MaxSpecBytes: cfg.Limits.MaxSpecBytes, MaxTurns: cfg.Limits.MaxTurns}}
	if len(cfg.Routes) > 0 {
		o.Routes = cfg.RouteNames()
	}
	return o
}

// Close releases the clients.
func (c *Clients) Close() error {
	return c.Redis.Close()
}

// Prices converts the configured price table for tasks.Cost.
func Prices(cfg config.Config) map[string]tasks.Price {
	out := make(map[string]tasks.Price, len(cfg.Prices))
	for t, p := range cfg.Prices {
		out[t] = tasks.Price{PromptPerMTok: p.Prompt, CompletionPerMTok: p.Completion}
	}
	return out
}

// AsynqConnOpt is the configured Redis as asynq's connection options (for
// asynqmon, which opens its own connection).
func AsynqConnOpt(c config.Redis) (asynq.RedisConnOpt, error) {
	u, err := c.Universal()
	if err != nil {
		return nil, err
	}
	switch {
	case u.IsClusterMode:
		return asynq.RedisClusterClientOpt{Addrs: u.Addrs, Username: u.Username, Password: u.Password, TLSConfig: u.TLSConfig}, nil
	case u.MasterName != "":
		return asynq.RedisFailoverClientOpt{MasterName: u.MasterName, SentinelAddrs: u.Addrs, SentinelPassword: u.SentinelPassword,
			Username: u.Username, Password: u.Password, DB: u.DB, TLSConfig: u.TLSConfig}, nil
	}
	return asynq.RedisClientOpt{Addr: u.Addrs[0], Username: u.Username, Password: u.Password, DB: u.DB, TLSConfig: u.TLSConfig}, nil
}
