// Package worker runs the agentq worker: an asynq server whose handler runs
// workflow steps through the router, plus its health endpoint.
package worker

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/metrics"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/redact"
	"github.com/agentq/agentq/retry"
	"github.com/agentq/agentq/tasks"
)

// Options configures Run. Config and Logger are required.
type Options struct {
	Config config.Config
	Logger *slog.Logger
	// Redis, when set, is used instead of connecting to Config.Redis.
	Redis redis.UniversalClient
	// WaitForRedis, when positive, keeps trying to reach Config.Redis at
	// start (with backoff) for up to this long; zero: one try.
	WaitForRedis time.Duration
	// Transport carries LLM calls; nil: http.DefaultTransport.
	Transport http.RoundTripper
	// Events hears each settled step; may be nil.
	Events func(tasks.StepEvent)
	// Random feeds retry jitter; nil: math/rand/v2.
	Random func() float64
	// TaskCheckInterval is how often idle workers poll; 0:
	// Config.Worker.PollInterval.
	TaskCheckInterval time.Duration
	// DelayedTaskCheckInterval is how often retries that are due are moved
	// back to their queue; 0: Config.Worker.RetryPollInterval.
	DelayedTaskCheckInterval time.Duration
	// Ready is called once the server takes tasks; may be nil.
	Ready func()
	// Middleware wraps the step handler; may be nil (tests inject faults).
	Middleware func(asynq.Handler) asynq.Handler
	// BeforeEnqueue is passed to the handler (crash drills); may be nil.
	BeforeEnqueue func(wf, step string, ready []string)
	// Observer hears every LLM call the router makes; may be nil.
	Observer llmclient.Observer
	// MetricsListening is called with the address /metrics is served on
	// (Config.Worker.MetricsAddr, which may be a :0 port); may be nil.
	MetricsListening func(net.Addr)
	// ReconcileInterval is how often the reconciler looks for steps asynq
	// ended without a word (one worker of the cluster at a time); 0: 30s;
	// negative: this worker never reconciles.
	ReconcileInterval time.Duration
	// ReconcileGrace is how long a step must look stranded before the
	// reconciler touches it; 0: twice ReconcileInterval.
	ReconcileGrace time.Duration
	// Now is the reconciler's clock; nil: time.Now.
	Now func() time.Time
	// Steps are the code steps this worker serves (a spec's run: NAME).
	Steps map[string]tasks.StepFunc
	// Tools are the tools this worker runs for prompt steps (a spec's
	// tools: NAME).
	Tools map[string]tasks.Tool
	// AdvertiseInterval is how often the worker renews its advertisement
	// of what it serves (it lapses after three); 0: 10s.
	AdvertiseInterval time.Duration
}

// observers fans calls out to several observers.
type observers []llmclient.Observer

func (o observers) Call(route string, t llmclient.Target, key string, class retry.Class, dur time.Duration, u llmclient.Usage) {
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

// Run serves until ctx is done, then shuts down gracefully: running steps
// get Config.Worker.ShutdownTimeout to finish; unfinished ones go back to
// the queue and resume from their checkpoints.
func Run(ctx context.Context, o Options) error {
	cfg := o.Config
	if len(cfg.Providers) == 0 || len(cfg.Routes) == 0 {
		return &config.FieldError{Field: "providers", Msg: "the worker needs at least one provider and one route in its configuration"}
	}
	// whatever logger the caller gave, no line carries a configured secret
	o.Logger = slog.New(redact.Handler(o.Logger.Handler(), redact.New(cfg.Secrets()...)))
	rdb := o.Redis
	if rdb == nil {
		var err error
		if rdb, err = app.WaitForRedis(ctx, cfg.Redis, o.WaitForRedis, o.Logger); err != nil {
			return err
		}
		defer rdb.Close()
	}
	providers, err := app.Providers(cfg, o.Transport)
	if err != nil {
		return err
	}
	// key and breaker state: shared through Redis, read from local copies
	// refreshed every second and at once when another worker announces a
	// change
	keys := llmclient.NewKeyPools(app.KeyStore{KeyState: store.NewKeyState(rdb, nil)}, nil, o.Logger)
	breakers := llmclient.NewBreakers(store.NewBreakers(rdb), cfg.Resilience.Breaker.Config(2*maxProviderTimeout(cfg)), nil, o.Random, o.Logger)
	names := make([]string, 0, len(providers))
	for n := range providers {
		names = append(names, n)
	}
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	pokeKeys, pokeBreakers := make(chan struct{}, 1), make(chan struct{}, 1)
	poke := func(ch chan struct{}) {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
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
	if err := breakers.Refresh(ctx, names); err != nil {
		return err
	}
	hc := cfg.Resilience.Health
	health := llmclient.NewHealth(app.HealthStore{HealthStats: store.NewHealthStats(rdb)}, llmclient.HealthConfig{Window: hc.Window.D(),
		Weights: llmclient.HealthWeights{Success: hc.Weights.Success, Latency: hc.Weights.Latency, Trend: hc.Weights.Trend}}, nil, o.Logger)
	go health.Run(bg, names, time.Second)
	go keys.Run(bg, names, time.Second, pokeKeys)
	go breakers.Run(bg, names, time.Second, pokeBreakers)
	var router *llmclient.Router
	insp := asynq.NewInspectorFromRedisClient(rdb)
	mets := metrics.New(insp, func() []metrics.TargetState {
		var out []metrics.TargetState
		for _, t := range router.Targets() {
			out = append(out, metrics.TargetState{Provider: t.Provider, Model: t.Model, Breaker: t.Breaker, Health: t.Health})
		}
		return out
	})
	obs := observers{mets}
	if o.Observer != nil {
		obs = append(obs, o.Observer)
	}
	router, err = app.Router(cfg, providers, keys, breakers, health, store.NewLimits(rdb, nil), o.Logger, obs)
	if err != nil {
		return err
	}
	events := mets.Step
	if o.Events != nil {
		events = func(e tasks.StepEvent) { mets.Step(e); o.Events(e) }
	}
	go func() {
		t := time.NewTicker(cfg.Resilience.Breaker.ProbeInterval.D())
		defer t.Stop()
		for {
			select {
			case <-bg.Done():
				return
			case <-t.C:
				router.ProbeOpen(bg)
			}
		}
	}()
	client := asynq.NewClientFromRedisClient(rdb)
	h, err := tasks.NewHandler(tasks.HandlerOptions{Redis: rdb, Retention: cfg.Retention.D(), Client: client, Router: router, Logger: o.Logger,
		MaxOutputBytes: cfg.Limits.MaxOutputBytes, Events: events, BeforeEnqueue: o.BeforeEnqueue, Steps: o.Steps, Tools: o.Tools})
	if err != nil {
		return err
	}
	random := o.Random
	if random == nil {
		random = rand.Float64
	}
	policy := tasks.RetryPolicy{Backoff: cfg.Resilience.Retry.Backoff(), Random: random}
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency:    cfg.Worker.Concurrency,
		Queues:         cfg.Worker.Queues,
		RetryDelayFunc: policy.RetryDelay,
		IsFailure:      policy.IsFailure,
		// a step asynq archives by itself (a panic, a deadline it
		// enforced, retries spent outside the handler's dead-letter path)
		// is settled dead there, so its workflow does not wait forever
		ErrorHandler:             h,
		ShutdownTimeout:          cfg.Worker.ShutdownTimeout.D(),
		TaskCheckInterval:        cmp.Or(o.TaskCheckInterval, cfg.Worker.PollInterval.D()),
		DelayedTaskCheckInterval: cmp.Or(o.DelayedTaskCheckInterval, cfg.Worker.RetryPollInterval.D()),
		Logger:                   asynqLogger{o.Logger},
		LogLevel:                 asynq.WarnLevel,
	})
	mux := asynq.NewServeMux()
	var sh asynq.Handler = h
	if o.Middleware != nil {
		sh = o.Middleware(sh)
	}
	mux.Handle(tasks.TypeStep, sh)
	if err := srv.Start(mux); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	reconciled := make(chan struct{})
	if o.ReconcileInterval >= 0 {
		// what asynq ends without calling the ErrorHandler (a lease that
		// expired on a task's last attempt) is settled by the reconciler
		rec, err := h.Reconciler(tasks.ReconcilerOptions{Inspector: insp, Interval: o.ReconcileInterval, Grace: o.ReconcileGrace, Now: o.Now})
		if err != nil {
			srv.Shutdown()
			return err
		}
		go func() { defer close(reconciled); rec.Run(bg) }()
	} else {
		close(reconciled)
	}
	defer func() { stopBG(); <-reconciled }()
	ad, err := advertise(ctx, rdb, o, o.AdvertiseInterval)
	if err != nil {
		srv.Shutdown()
		return err
	}
	defer ad.stop(ctx)
	var hs *http.Server
	if addr := cfg.Worker.MetricsAddr; addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			srv.Shutdown()
			return fmt.Errorf("worker.metrics_addr %s: %w", addr, err)
		}
		hs = &http.Server{Handler: serveMux(rdb, mets), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = hs.Serve(ln) }()
		if o.MetricsListening != nil {
			o.MetricsListening(ln.Addr())
		}
	}
	o.Logger.Info("worker started", "worker", ad.ad.ID, "concurrency", cfg.Worker.Concurrency, "queues", config.FormatQueues(cfg.Worker.Queues),
		"providers", len(providers), "routes", len(cfg.Routes), "redis", cfg.Redis.Where())
	if o.Ready != nil {
		o.Ready()
	}
	<-ctx.Done()
	o.Logger.Info("worker stopping: no new steps; running steps may finish", "shutdown_timeout", cfg.Worker.ShutdownTimeout.String())
	ad.stop(ctx) // submits stop counting on this worker
	srv.Shutdown()
	if hs != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}
	o.Logger.Info("worker stopped")
	return nil
}

func maxProviderTimeout(cfg config.Config) time.Duration {
	d := time.Minute
	for _, p := range cfg.Providers {
		d = max(d, p.Timeout.D())
	}
	return d
}

// serveMux answers /metrics and /healthz (Redis reachability).
func serveMux(rdb redis.UniversalClient, mets *metrics.Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", mets.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := rdb.Ping(ctx).Err(); err != nil {
			http.Error(w, "redis unreachable", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// asynqLogger sends asynq's logs to slog.
type asynqLogger struct{ l *slog.Logger }

func (a asynqLogger) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLogger) Info(args ...any)  { a.l.Info(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLogger) Warn(args ...any) {
	msg := fmt.Sprint(args...)
	if strings.HasPrefix(msg, "Retry exhausted for task") {
		// asynq says so for every task it archives, SkipRetry included;
		// agentq logs its own line for each dead letter, with the reason
		a.l.Debug(msg, "component", "asynq")
		return
	}
	a.l.Warn(msg, "component", "asynq")
}
func (a asynqLogger) Error(args ...any) { a.l.Error(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLogger) Fatal(args ...any) {
	a.l.Error(fmt.Sprint(args...), "component", "asynq", "fatal", true)
	os.Exit(1) // asynq's contract (and its default logger): Fatal does not return
}
