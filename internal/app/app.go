// Package app is the one place a loaded configuration becomes running
// parts: the Redis client, the logger behind the secrets' redactor, the
// producer client, the providers and the router with their shared state,
// metrics. The worker, the dashboard, enqueue and the SDK all call Build,
// each naming the parts it uses; a part nobody asked for is not built (and
// a binary that never names it does not link its constructor).
package app

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/metrics"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/redact"
)

// Options say how Build reaches Redis and where its parts log. The zero
// value connects to the configured Redis once and discards logs.
type Options struct {
	// Logger receives every part's logs, behind a redactor of the
	// configuration's secrets and Secrets; nil: discarded.
	Logger *slog.Logger
	// Secrets are more values no log line may carry (the dashboard's
	// token).
	Secrets []string
	// Redis, when set, is used instead of connecting to the configured
	// Redis, and Close leaves it open.
	Redis redis.UniversalClient
	// WaitForRedis, when positive, keeps trying to reach Redis at start
	// (with backoff) for up to this long; zero: one try.
	WaitForRedis time.Duration
}

// A Part is one thing Build makes, from the configuration and the parts
// built before it: Producer, Router, Monitor, AsynqMon.
type Part struct {
	name  string
	build func(ctx context.Context, a *App) error
}

// App is what Build made. Fields of parts that were not asked for are nil.
type App struct {
	Config config.Config
	// Logger is Options.Logger behind the redactor.
	Logger *slog.Logger
	// Redactor removes the configuration's secrets (and Options.Secrets)
	// from text.
	Redactor *redact.Redactor
	Redis    redis.UniversalClient
	// Inspector reads asynq's queues (Router, Monitor).
	Inspector *asynq.Inspector
	// Client is the producer client (Producer).
	Client *producer.Client
	// Router calls the configured routes (Router).
	Router *router.Router
	// Metrics are the Prometheus metrics: calls, steps and queues (Router);
	// queues only (Monitor).
	Metrics *metrics.Metrics
	// Health scores targets: recording this process's calls (Router), or
	// reading the workers' counts only (Monitor).
	Health *router.Health
	// Breakers are the breakers' shared states, as read (Monitor).
	Breakers *store.Breakers
	// CallBreakers are the breakers this worker's calls go through, shared
	// with the other workers (Router): the providers' targets', and the MCP
	// servers' (config.MCPBreaker).
	CallBreakers *router.Breakers
	// AsynqOpt is the Redis as asynq's connection options (AsynqMon).
	AsynqOpt asynq.RedisConnOpt

	ownRedis bool
	stop     context.CancelFunc // ends the parts' background work
	bg       sync.WaitGroup
}

// Build connects to Redis (or uses Options.Redis) and builds the parts, in
// order. On error, what was built is released.
func Build(ctx context.Context, cfg config.Config, o Options, parts ...Part) (*App, error) {
	red := Redactor(cfg, o.Secrets...)
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &App{Config: cfg, Redactor: red, Logger: slog.New(redact.Handler(log.Handler(), red)), Redis: o.Redis, stop: func() {}}
	if a.Redis == nil {
		rdb, err := WaitForRedis(ctx, cfg.Redis, o.WaitForRedis, a.Logger)
		if err != nil {
			return nil, err
		}
		a.Redis, a.ownRedis = rdb, true
	}
	seen := map[string]bool{}
	for _, p := range parts {
		if seen[p.name] {
			a.Close()
			return nil, errors.New("app: the part " + p.name + " is asked for twice")
		}
		seen[p.name] = true
		if err := p.build(ctx, a); err != nil {
			a.Close()
			return nil, err
		}
	}
	return a, nil
}

// Redactor removes the configuration's secrets and extra from text: what
// every logger of agentq's commands is behind.
func Redactor(cfg config.Config, extra ...string) *redact.Redactor {
	return redact.New(append(cfg.Secrets(), extra...)...)
}

// background runs f on the parts' background context until Close.
func (a *App) background(ctx context.Context, f func(context.Context)) {
	a.bg.Add(1)
	go func() { defer a.bg.Done(); f(ctx) }()
}

// backgroundContext is the context the parts' background work runs on,
// made on first use: it outlives ctx's cancellation (a worker's shutdown
// still needs its router) and ends with Close.
func (a *App) backgroundContext(ctx context.Context) context.Context {
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	prev := a.stop
	a.stop = func() { prev(); cancel() }
	return bg
}

// inspector is the shared asynq inspector, made on first use.
func (a *App) inspector() *asynq.Inspector {
	if a.Inspector == nil {
		a.Inspector = asynq.NewInspectorFromRedisClient(a.Redis)
	}
	return a.Inspector
}

// Close stops the parts' background work and closes Redis if Build opened
// it.
func (a *App) Close() error {
	a.stop()
	a.bg.Wait()
	if a.ownRedis {
		return a.Redis.Close()
	}
	return nil
}
