// Package testenv starts what an end-to-end test needs: a real Redis
// database (redistest), chaosllm over real HTTP, and a worker running the
// real handler, all stopped when the test ends.
package testenv

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/worker"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// Keys are the API keys chaosllm accepts in a test environment.
var Keys = []string{"sk-test-primary-111111", "sk-test-backup-222222"}

// Env is a running test environment.
type Env struct {
	DB      redistest.DB
	Redis   redis.UniversalClient
	Chaos   *chaosllm.Server
	URL     string // chaosllm base URL
	Config  config.Config
	Store   *store.Store
	Client  *producer.Client
	Asynq   *asynq.Client
	Events  chan engine.StepEvent
	Spec    func(yaml string) *spec.Spec
	stopped chan error
	cancel  context.CancelFunc
	opts    Options
	// Calls counts the LLM calls every worker of this Env made, by target
	// and class (what chaosllm cannot see, such as refused connections).
	Calls *CallCounter
	// MetricsURL is the first worker's /metrics, with Options.Metrics.
	MetricsURL string
}

// CallCounter is an router.Observer that counts calls.
type CallCounter struct {
	mu sync.Mutex
	n  map[string]int // "provider/model class"
}

// Call implements router.Observer.
func (c *CallCounter) Call(_ string, t router.Target, _ string, class retry.Class, _ time.Duration, _ llmclient.Usage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[t.String()+" "+string(class)]++
}

// Fallback implements router.Observer.
func (c *CallCounter) Fallback(string, string, string) {}

// KeyEvent implements router.Observer.
func (c *CallCounter) KeyEvent(string, string, string) {}

// Count is the calls to target ("provider/model") of class ("" for all).
func (c *CallCounter) Count(target string, class retry.Class) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, v := range c.n {
		if strings.HasPrefix(k, target+" ") && (class == "" || k == target+" "+string(class)) {
			n += v
		}
	}
	return n
}

// ConfigYAML is the test configuration; ${CHAOS} is chaosllm's URL.
// Routes: "main" (openai then anthropic), "solo" (openai only),
// "flaky" (a port that refuses connections) with a fallback text.
const ConfigYAML = `
providers:
  - { name: oa, kind: openai, base_url: "${CHAOS}/v1", keys: ["${K1}", "${K2}"], timeout: 5s }
  - { name: an, kind: anthropic, base_url: "${CHAOS}", keys: ["${K1}"], timeout: 5s }
  - { name: dead, kind: openai, base_url: "http://127.0.0.1:1/v1", keys: ["x"], timeout: 1s }
  - { name: capped, kind: anthropic, base_url: "${CHAOS}", keys: ["${K1}"], timeout: 5s, max_concurrency: 2 }
routes:
  main:  { targets: [ { provider: oa, model: m-oa }, { provider: an, model: m-an } ], strategy: ordered }
  scored: { targets: [ { provider: oa, model: m-oa }, { provider: an, model: m-an } ] }
  limited: { targets: [ { provider: capped, model: m-capped } ] }
  hedged: { targets: [ { provider: oa, model: m-oa }, { provider: an, model: m-an } ], strategy: ordered, hedge_after: p95 }
  solo:  { targets: [ { provider: oa, model: m-solo } ] }
  flaky: { targets: [ { provider: dead, model: m-dead } ], fallback_text: "fallback answer" }
  fallback:
    targets: [ { provider: oa, model: m-small } ]
    context_window_fallback: { provider: an, model: m-long }
    content_fallback: { provider: an, model: m-safe }
resilience:
  retry: { base: 1s, factor: 1, max_delay: 1s, jitter: [0.5, 0.6] }
  breaker: { consecutive_failures: 3, error_rate: 0.9, min_calls: 20, window: 10s, cooldown: 2s, probe_interval: 200ms }
  health: { window: 10s }
worker:
  concurrency: 8
  queues: { default: 1 }
retention: 1h
`

// ServeChaos serves chaosllm on a loopback port (closing its listener in
// refuse phases) until the test ends, and returns its URL.
func ServeChaos(t *testing.T, srv *chaosllm.Server) string {
	// a root owned by the harness: canceled in Cleanup, after the workers
	// registered later have stopped (cleanups run last-in first-out)
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- chaosllm.Serve(ctx, "127.0.0.1:0", srv, func(a net.Addr) { addrc <- a }) }()
	select {
	case a := <-addrc:
		t.Cleanup(func() { cancel(); <-done })
		return "http://" + a.String()
	case err := <-done:
		cancel()
		t.Fatalf("chaosllm: %v", err)
		return ""
	}
}

// Config is the test configuration for a chaosllm URL and a database.
func Config(chaosURL string, db redistest.DB) (config.Config, error) {
	vars := map[string]string{"CHAOS": chaosURL, "K1": Keys[0], "K2": Keys[1]}
	cfg, err := config.Load(config.Input{Path: "testenv.yaml", Data: []byte(ConfigYAML),
		LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	cfg.Redis.Addr, cfg.Redis.DB = db.Addr, db.DB
	return cfg, err
}

// Options tune Start.
type Options struct {
	Scenario chaosllm.Scenario
	NoWorker bool // start everything but the worker
	// PollInterval is the worker's asynq TaskCheckInterval; 0: 50ms. An
	// hour makes a test's steps after the first run by hand-offs only.
	PollInterval time.Duration
	// ReconcileInterval is the worker's reconciler's interval (its grace
	// twice that); 0: the worker's default, 30s.
	ReconcileInterval time.Duration
	LogOutput         bool      // send worker logs to stderr (debugging)
	LogTo             io.Writer // send worker logs here, as JSON at debug level (must be safe for concurrent writes)
	// Middleware wraps the worker's step handler (fault injection).
	Middleware func(asynq.Handler) asynq.Handler
	// Metrics serves the worker's /metrics on a loopback port (MetricsURL).
	Metrics bool
	// RecordAnswered is how many answered prompts chaosllm keeps
	// (Chaos.Answered); 0: none.
	RecordAnswered int
	// Cluster runs everything on a throwaway three-master Redis Cluster.
	Cluster bool
	// Queues are the configuration's declared queues (queues:), their
	// shards read by the client and the workers alike.
	Queues map[string]config.Queue
	// RedisAddr, when set, is a Redis of the test's own (database 0), e.g.
	// a redistest.Server it restarts.
	RedisAddr string
	// Steps are the code steps the workers serve.
	Steps map[string]engine.StepFunc
	// Tools are the tools the workers run for prompt steps.
	Tools map[string]engine.Tool
	// Durability is the configuration's redis.durability (nil: off), for
	// the workers and the test's client.
	Durability *config.Durability
	// Sentinel, when set, runs everything on that Sentinel deployment's
	// primary, found through its sentinels (as redis.sentinel does).
	Sentinel *redistest.Sentinels
	// Configure, when set, changes the test configuration (retention,
	// limits, ...) before anything is built from it.
	Configure func(*config.Config)
}

// Start builds the environment.
func Start(t *testing.T, o Options) *Env {
	t.Helper()
	var (
		db  redistest.DB
		rdb redis.UniversalClient
	)
	switch {
	case o.Sentinel != nil:
		db = redistest.DB{Addr: o.Sentinel.Master(t), Kind: "sentinel"}
		c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: o.Sentinel.MasterName, SentinelAddrs: o.Sentinel.Addrs})
		t.Cleanup(func() { c.Close() })
		rdb = c
	case o.RedisAddr != "":
		db = redistest.DB{Addr: o.RedisAddr, Kind: "redis-server"}
		c := redis.NewClient(db.Options())
		t.Cleanup(func() { c.Close() })
		rdb = c
	case o.Cluster:
		cc, addrs := redistest.Cluster(t)
		rdb, db = cc, redistest.DB{Addr: addrs[0], Kind: "cluster"}
	default:
		var c *redis.Client
		db, c = redistest.New(t)
		rdb = c
	}
	if len(o.Scenario.Keys) == 0 {
		o.Scenario.Keys = Keys
	}
	chaos, err := chaosllm.New(o.Scenario, chaosllm.Options{RecordAnswered: o.RecordAnswered})
	if err != nil {
		t.Fatal(err)
	}
	url := ServeChaos(t, chaos)
	cfg, err := Config(url, db)
	if err != nil {
		t.Fatal(err)
	}
	if o.Cluster {
		cfg.Redis.Cluster = []string{db.Addr}
	}
	if o.Sentinel != nil {
		cfg.Redis.Sentinel = &config.Sentinel{MasterName: o.Sentinel.MasterName, Addrs: o.Sentinel.Addrs}
	}
	cfg.Queues = o.Queues
	cfg.Redis.Durability = o.Durability
	if o.Configure != nil {
		o.Configure(&cfg)
	}
	e := &Env{DB: db, Redis: rdb, Chaos: chaos, URL: url, Config: cfg,
		Store: store.New(rdb, cfg.Retention.D(), nil), Asynq: asynq.NewClientFromRedisClient(rdb),
		Events: make(chan engine.StepEvent, 1024), Calls: &CallCounter{n: map[string]int{}}}
	e.Store.SetMaxOpenAge(cfg.Limits.MaxOpenAge.D())
	e.Client = e.NewClient()
	e.Spec = func(y string) *spec.Spec {
		t.Helper()
		s, err := e.Client.Parse("test.yaml", []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	e.opts = o
	if !o.NoWorker {
		e.StartWorker(t)
	}
	return e
}

// NewClient is a producer client on e's Redis with e.Config's options,
// submitting without a check against live workers (tests submit before
// their workers start).
func (e *Env) NewClient() *producer.Client {
	o := app.ClientOptions(e.Config)
	return producer.NewClient(e.Redis, producer.ClientOptions{Limits: o.Limits, Retention: o.Retention, Routes: o.Routes, SkipWorkerCheck: true,
		EventLimit: o.EventLimit, Shards: o.Shards, Durability: o.Durability})
}

// WorkerOptions are the options StartWorker runs a worker with; a test
// that runs a worker in another process uses them too.
func (e *Env) WorkerOptions(log *slog.Logger) worker.Options {
	return worker.Options{Config: e.Config, Logger: log, Redis: e.Redis,
		Random:            func() float64 { return 0 },
		TaskCheckInterval: cmp.Or(e.opts.PollInterval, 50*time.Millisecond), DelayedTaskCheckInterval: 100 * time.Millisecond,
		Middleware: e.opts.Middleware, Observer: e.Calls, Steps: e.opts.Steps, Tools: e.opts.Tools, ReconcileInterval: e.opts.ReconcileInterval}
}

// StartWorker runs a worker until the test ends.
func (e *Env) StartWorker(t *testing.T) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	if e.opts.LogOutput {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if e.opts.LogTo != nil {
		log = slog.New(slog.NewJSONHandler(e.opts.LogTo, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	e.stopped = make(chan error, 1)
	e.cancel = cancel
	o := e.WorkerOptions(log)
	if e.opts.Metrics && e.MetricsURL == "" {
		o.Config.Worker.MetricsAddr = "127.0.0.1:0"
		o.MetricsListening = func(a net.Addr) { e.MetricsURL = "http://" + a.String() + "/metrics" }
	}
	o.Events = func(ev engine.StepEvent) {
		select {
		case e.Events <- ev:
		default:
		}
	}
	o.Ready = func() { close(ready) }
	go func() { e.stopped <- worker.Run(ctx, o) }()
	// from here on the worker is stopped (and waited for) before the
	// cleanups before this one close its Redis: asynq's server does not
	// survive its client closed under it
	t.Cleanup(func() { e.StopWorker(t) })
	select {
	case <-ready:
	case err := <-e.stopped:
		e.cancel, e.stopped = nil, nil
		t.Fatalf("worker did not start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not start within 30s")
	}
}

// StartAnotherWorker runs one more worker on the same Redis and chaosllm
// (a second replica) until the test ends.
func (e *Env) StartAnotherWorker(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	o := e.WorkerOptions(slog.New(slog.DiscardHandler))
	ready, done := make(chan struct{}), make(chan error, 1)
	o.Ready = func() { close(ready) }
	go func() { done <- worker.Run(ctx, o) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("another worker did not start: %v", err)
	}
	t.Cleanup(func() { cancel(); <-done })
}

// StopWorker stops the worker and waits for it. A worker still running
// well past its shutdown timeout fails the test, and is still waited for:
// the cleanups after this one close the Redis it serves from, which
// asynq's server does not survive (go test's -timeout then prints where
// it hangs).
func (e *Env) StopWorker(t *testing.T) {
	if e.cancel == nil {
		return
	}
	e.cancel()
	e.cancel = nil
	limit := e.Config.Worker.ShutdownTimeout.D() + 30*time.Second
	select {
	case err := <-e.stopped:
		if err != nil {
			t.Errorf("worker: %v", err)
		}
		return
	case <-time.After(limit):
		t.Errorf("worker did not stop within %s (its shutdown timeout and 30s)", limit)
	}
	if err := <-e.stopped; err != nil {
		t.Errorf("worker: %v", err)
	}
}

// Submit submits a spec and returns the workflow id.
func (e *Env) Submit(t *testing.T, wspec *spec.Spec) string {
	t.Helper()
	id, err := e.Client.Submit(t.Context(), wspec)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// Wait polls until the workflow is in one of states, or fails the test
// after limit.
func (e *Env) Wait(t *testing.T, id string, limit time.Duration, states ...string) *store.Workflow {
	t.Helper()
	var (
		last    *store.Workflow
		lastErr error
	)
	var missingSince time.Time
	poll.Until(t, limit, func() (bool, string) {
		wf, err := e.Store.Get(t.Context(), id)
		// gone is a loss, and fails the test; gone for an instant is a
		// read that reached a node still serving an old, empty dataset
		// right after a failover (a restarted primary before it follows
		// the promoted one): looked at again for 2s
		switch {
		case errors.Is(err, store.ErrNotFound) && missingSince.IsZero():
			missingSince = time.Now()
		case errors.Is(err, store.ErrNotFound) && time.Since(missingSince) > 2*time.Second:
			t.Fatal(err)
		case !errors.Is(err, store.ErrNotFound):
			if !missingSince.IsZero() {
				t.Logf("workflow %s read as not found for %s, then found again", id, time.Since(missingSince).Round(time.Millisecond))
			}
			missingSince = time.Time{}
		}
		if err != nil { // Redis away (a restart drill): look again until the deadline
			lastErr = err
		} else {
			last = wf
			if slices.Contains(states, wf.State) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("workflow %s did not reach %v within %s; last: %+v (last error: %v)", id, states, limit, last, lastErr)
	})
	return last
}

// Buffer is a bytes.Buffer that a worker or command may write from many
// goroutines while the test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
