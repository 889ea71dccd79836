// Package worker runs the agentq worker: an asynq server whose handler runs
// workflow steps through the router, plus its health endpoint.
package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/mcptool"
	"github.com/agentq/agentq/internal/metrics"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
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
	// Transport carries LLM calls; nil: a copy of http.DefaultTransport
	// that keeps worker.concurrency (at least 256) idle connections per
	// host (llmclient.Options.IdleConnsPerHost).
	Transport http.RoundTripper
	// Events hears each settled step; may be nil.
	Events func(engine.StepEvent)
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
	// AfterChild is passed to the handler (crash drills); may be nil.
	AfterChild func(wf, step, child string)
	// Observer hears every LLM call the router makes; may be nil.
	Observer router.Observer
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
	Steps map[string]engine.StepFunc
	// Specs are the specs this worker registers by name (RegisterSpec):
	// stored when it starts, each a new version unless unchanged.
	Specs map[string]*spec.Spec
	// Tools are the tools this worker runs for prompt steps (a spec's
	// tools: NAME).
	Tools map[string]engine.Tool
	// AdvertiseInterval is how often the worker renews its advertisement
	// of what it serves (it lapses after three); 0: 10s.
	AdvertiseInterval time.Duration
}

// Run serves until ctx is done, then shuts down gracefully: running steps
// get Config.Worker.ShutdownTimeout to finish; unfinished ones go back to
// the queue and resume from their checkpoints.
func Run(ctx context.Context, o Options) error {
	cfg := o.Config
	if len(cfg.Providers) == 0 || len(cfg.Routes) == 0 {
		return &config.FieldError{Field: "providers", Msg: "the worker needs at least one provider and one route in its configuration"}
	}
	// the one builder: Redis, the redacting logger, the router with its
	// shared state, the metrics, the producer client (schedules submit)
	built, err := app.Build(ctx, cfg, app.Options{Logger: o.Logger, Redis: o.Redis, WaitForRedis: o.WaitForRedis},
		app.Router(app.RouterOptions{Transport: o.Transport, Random: o.Random, Observer: o.Observer}), app.Producer())
	if err != nil {
		return err
	}
	defer built.Close()
	// whatever logger the caller gave, no line carries a configured secret
	o.Logger = built.Logger
	rdb, router, mets, insp := built.Redis, built.Router, built.Metrics, built.Inspector
	sched, err := newSchedules(built) // docs/schedules.md; none without schedules:
	if err != nil {
		return err
	}
	events := mets.Step
	if o.Events != nil {
		events = func(e engine.StepEvent) { mets.Step(e); o.Events(e) }
	}
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	wh, err := newWebhooks(cfg, o.Logger, mets.Webhook) // docs/webhooks.md; the zero value without webhooks.secret
	if err != nil {
		return err
	}
	client := asynq.NewClientFromRedisClient(rdb)
	random := o.Random
	if random == nil {
		random = rand.Float64
	}
	// one policy: the handler decides (and records) each failed attempt's
	// wait with it, and asynq's RetryDelayFunc answers with it
	policy := engine.RetryPolicy{Backoff: cfg.Resilience.Retry.Backoff(), Random: random}
	id := newWorkerID()
	// the MCP servers prompt steps take tools from: each started or
	// reached at its first use (docs/mcp.md)
	mcpServers := mcptool.New(cfg.MCPServers, mcptool.Options{Logger: o.Logger, Redact: built.Redactor.String, MaxResultBytes: cfg.Limits.MaxOutputBytes,
		Breakers: built.CallBreakers, Observer: mets})
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		mcpServers.Close(sctx)
	}()
	h, err := engine.NewHandler(engine.HandlerOptions{MCP: mcpServers, Redis: rdb, Retention: cfg.Retention.D(), MaxOpenAge: cfg.Limits.MaxOpenAge.D(), Client: client, Router: router, Logger: o.Logger,
		MaxOutputBytes: cfg.Limits.MaxOutputBytes, MaxMapItems: cfg.Limits.MaxMapItems, MaxTreeWorkflows: cfg.Limits.MaxTreeWorkflows, Events: events, BeforeEnqueue: o.BeforeEnqueue, AfterChild: o.AfterChild, Steps: o.Steps, Tools: o.Tools, Webhooks: wh.notify,
		Prices: app.Prices(cfg), Retry: &policy, EventLimit: cfg.Events.EventLimit(), EventContent: cfg.Events.Content, Worker: id, Redact: built.Redactor.String,
		KeyLease: cfg.Worker.KeyLease.D(), Durability: app.Durability(cfg)})
	if err != nil {
		return err
	}
	mets.WatchKeys(h.KeyLoads)
	if err := registerSpecs(ctx, store.New(rdb, cfg.Retention.D(), nil), o.Specs, o.Logger); err != nil {
		return err
	}
	queues, err := asynqQueues(ctx, insp, store.New(rdb, cfg.Retention.D(), nil), cfg, wh.queues)
	if err != nil {
		return fmt.Errorf("read the queues: %w", err)
	}
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency:    cfg.Worker.Concurrency,
		Queues:         queues,
		RetryDelayFunc: wh.retryDelay(policy.RetryDelay, random),
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
	// a step's task runs the step it made ready in its own slot
	// (engine/handoff.go); every step is held to its own timeout there
	handoffs, err := h.Handoffs(ctx, engine.HandoffOptions{Queues: slices.Collect(maps.Keys(queues)), Concurrency: cfg.Worker.Concurrency, Run: sh,
		ErrorHandler: h, RetryDelay: wh.retryDelay(policy.RetryDelay, random), IsFailure: policy.IsFailure, Off: cfg.Worker.NoHandoffs})
	if err != nil {
		return err
	}
	sh = handoffs.Serve(sh)
	hctx, stopLeases := context.WithCancel(context.WithoutCancel(ctx))
	go handoffs.Run(hctx)
	select {
	case <-handoffs.Listening(): // a cancel of a step it hands off is heard
	case <-ctx.Done():
	}
	stopHandoffs := sync.OnceFunc(func() { handoffs.Stop(cfg.Worker.ShutdownTimeout.D()); stopLeases() })
	defer stopHandoffs()
	mux.Handle(tasks.TypeStep, sh)
	wh.register(mux)
	if err := srv.Start(mux); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	reconciled := make(chan struct{})
	if o.ReconcileInterval >= 0 {
		// what asynq ends without calling the ErrorHandler (a lease that
		// expired on a task's last attempt) is settled by the reconciler
		rec, err := h.Reconciler(engine.ReconcilerOptions{Inspector: insp, Interval: o.ReconcileInterval, Grace: o.ReconcileGrace, Now: o.Now})
		if err != nil {
			srv.Shutdown()
			return err
		}
		go func() { defer close(reconciled); rec.Run(bg) }()
	} else {
		close(reconciled)
	}
	kept := make(chan struct{})
	go func() { defer close(kept); h.SlotKeeper(insp).Run(bg) }() // concurrency keys' leases
	defer func() { stopBG(); <-reconciled; <-kept }()
	ad, err := advertise(ctx, rdb, o, id, wh.queues, servedCounts(queues, wh.queues), o.AdvertiseInterval)
	if err != nil {
		srv.Shutdown()
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			// stopped while starting (a SIGTERM during a rollout), not a
			// failure: asynq's Shutdown above drained what it had taken
			o.Logger.Info("worker stopped while starting")
			return nil
		}
		return err
	}
	defer ad.stop(ctx)
	defer sched.start(ctx, ad.ad.ID)() // until ctx ends: the leases go before the drain
	var hs *http.Server
	if addr := cfg.Worker.MetricsAddr; addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			srv.Shutdown()
			return fmt.Errorf("worker.metrics_addr %s: %w", addr, err)
		}
		hs = &http.Server{Handler: serveMux(rdb, mets, ad, cfg.Worker.Profiling), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = hs.Serve(ln) }()
		if o.MetricsListening != nil {
			o.MetricsListening(ln.Addr())
		}
	}
	o.Logger.Info("worker started", "worker", ad.ad.ID, "concurrency", cfg.Worker.Concurrency, "queues", config.FormatQueues(cfg.Worker.Queues),
		"providers", len(cfg.Providers), "routes", len(cfg.Routes), "redis", cfg.Redis.Where())
	if o.Ready != nil {
		o.Ready()
	}
	<-ctx.Done()
	o.Logger.Info("worker stopping: no new steps; running steps may finish", "shutdown_timeout", cfg.Worker.ShutdownTimeout.String())
	ad.stop(ctx) // submits stop counting on this worker
	stopped := make(chan struct{})
	go func() { defer close(stopped); stopHandoffs() }() // the hand-offs drain beside asynq's tasks
	srv.Shutdown()
	<-stopped
	if hs != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}
	o.Logger.Info("worker stopped")
	return nil
}

// serveMux serves /metrics and the probes: /livez (and /healthz) answer
// 200 while the process serves, whatever Redis does (a Redis outage must
// not restart every worker: they resume by themselves when it is back);
// /readyz answers 200 while every Redis primary the worker writes to
// answers (app.PrimariesAnswer: on a Cluster, each of them) and the
// worker's advertisement is current (submits count on it), else 503 with
// one line saying which.
func serveMux(rdb redis.UniversalClient, mets *metrics.Metrics, ad *advertiser, profiling bool) http.Handler {
	mux := http.NewServeMux()
	if profiling {
		serveProfiles(mux)
	}
	mux.Handle("GET /metrics", mets.Handler())
	live := func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) }
	mux.HandleFunc("GET /livez", live)
	mux.HandleFunc("GET /healthz", live)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), app.ReadyTimeout)
		defer cancel()
		if err := app.PrimariesAnswer(ctx, rdb); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if !ad.current() {
			http.Error(w, "not advertised: its last renewal failed", http.StatusServiceUnavailable)
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

// registerSpecs stores the worker's registered specs by name (a new
// version of each whose content changed).
func registerSpecs(ctx context.Context, st *store.Store, specs map[string]*spec.Spec, log *slog.Logger) error {
	for name, s := range specs {
		b, err := json.Marshal(s)
		if err != nil {
			return fmt.Errorf("register spec %s: %w", name, err)
		}
		v, created, err := st.PutSpec(ctx, name, b)
		if err != nil {
			return fmt.Errorf("register spec %s: %w", name, err)
		}
		log.Info("spec registered", "spec", name, "version", v, "new", created)
	}
	return nil
}
