// Package config loads agentq.yaml (docs/configuration.md): YAML, ${VAR} expansion from
// the environment, AGENTQ_* variables and flags over the file, defaults for
// what is left out, and validation that names each problem's field.
package config

import (
	"net/url"
	"sort"
	"time"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/problem"
	"github.com/agentq/agentq/retry"
)

// Config is the whole configuration. The zero value of every field means
// its documented default (see Default).
type Config struct {
	// File is the configuration file that was read; empty when none was
	// (no --config and no agentq.yaml here): everything is a default, an
	// AGENTQ_* variable or a flag.
	File       string           `yaml:"-"`
	Redis      Redis            `yaml:"redis"`
	Providers  []Provider       `yaml:"providers"`
	Routes     map[string]Route `yaml:"routes"`
	Resilience Resilience       `yaml:"resilience"`
	// Queues declares queues for workers and producers alike: their
	// weights and shards (queues.go). Empty: none declared (worker.queues,
	// one shard each).
	Queues map[string]Queue `yaml:"queues"`
	Worker Worker           `yaml:"worker"`
	// Retention is how long workflow records, results and finished tasks
	// are kept. Default 24h.
	Retention Duration `yaml:"retention"`
	// Limits on submitted workflows.
	Limits Limits `yaml:"limits"`
	// Prices per target ("provider/model"), in currency units per million
	// tokens; workflows whose every step has a price show their cost.
	Prices map[string]Price `yaml:"prices"`
	// Webhooks signs and sends workflow notifications; zero: none.
	Webhooks Webhooks `yaml:"webhooks"`
	// Schedules are periodic workflows (schedules.go); a worker whose
	// configuration has any takes turns running them. Empty: none.
	Schedules []Schedule `yaml:"schedules"`
	// Budgets cap tokens and spend per route or provider per period
	// (budgets.go); empty: none.
	Budgets []Budget `yaml:"budgets"`
	// Events is each workflow's event log (docs/events.md).
	Events Events `yaml:"events"`
	// Signals configures signals (docs/signals.md).
	Signals Signals `yaml:"signals"`
	// Dashboard bounds the dashboard's event streams.
	Dashboard Dashboard `yaml:"dashboard"`
	// MCPServers are the MCP servers prompt steps may take tools from, by
	// name (mcp.go, docs/mcp.md); empty: none.
	MCPServers map[string]MCPServer `yaml:"mcp_servers"`
}

// Signals configures what a signal no step waited for becomes.
type Signals struct {
	// Keep is how long a signal that completed no step (none waited on
	// its name and match) is kept for the first step that begins waiting
	// on it. 0: the default, 10m; else between 1s and the retention.
	Keep Duration `yaml:"keep"`
}

// Events configures each workflow's event log: what happened, in order,
// for followers (the API's event stream, enqueue follow, the dashboard).
type Events struct {
	// Limit bounds each workflow's log: this many newest entries
	// are kept (a reader of the history is told how many were trimmed).
	// 0: the default, 10,000; else between 100 and 1,000,000.
	Limit int `yaml:"limit"`
	// Off keeps no log: followers see nothing until a workflow ends.
	Off bool `yaml:"off"`
	// Content puts the text of prompts, answers and tool arguments into
	// LLM call and tool events (redacted, bounded per entry); off by
	// default, as OpenTelemetry treats message content.
	Content bool `yaml:"content"`
}

// EventLimit is the bound each workflow's log is kept to; 0 when Off.
func (e Events) EventLimit() int {
	if e.Off {
		return 0
	}
	return e.Limit
}

// Price is what a target charges per million tokens.
type Price struct {
	Prompt     float64 `yaml:"prompt_per_mtok"`
	Completion float64 `yaml:"completion_per_mtok"`
}

// Redis says where Redis is. Addr and URL are alternatives; URL wins.
type Redis struct {
	Addr     string `yaml:"addr"` // default 127.0.0.1:6379
	URL      string `yaml:"url"`  // redis://user:pass@host:6379/0 or rediss://…
	Username string `yaml:"username"`
	Password Secret `yaml:"password"`
	DB       int    `yaml:"db"`
	// DialTimeout bounds connecting; default 5s.
	DialTimeout Duration `yaml:"dial_timeout"`
	// Cluster, when set, are seed addresses of a Redis Cluster (Addr and
	// URL are then ignored). Every agentq script touches one hash slot.
	Cluster []string `yaml:"cluster"`
	// Sentinel, when set, finds the master through Redis Sentinel.
	Sentinel *Sentinel `yaml:"sentinel"`
	// TLS, when set, turns TLS on (as a rediss:// URL does) and says whom
	// to trust; nil with a rediss:// URL trusts the system's roots.
	TLS *RedisTLS `yaml:"tls"`
	// Durability, when set, has every write that acknowledges something
	// (a submit, a step's settle, a signal, a cancel, a rerun, a
	// requeue) confirmed by replicas before anyone is told. Nil: off.
	Durability *Durability `yaml:"durability"`
}

// Durability asks Redis replicas to confirm acknowledging writes (WAIT).
type Durability struct {
	// Replicas is how many replicas must have each write before it is
	// acknowledged: those that may be promoted. At least 1.
	Replicas int `yaml:"replicas"`
	// Timeout is how long to wait for them; 0: 1s. A write not confirmed
	// in time is reported as not confirmed (it stays on the primary).
	Timeout Duration `yaml:"timeout"`
}

// RedisTLS configures TLS to Redis. Files are PEM.
type RedisTLS struct {
	CAFile     string `yaml:"ca_file"`     // CAs to trust; empty: the system's roots
	CertFile   string `yaml:"cert_file"`   // a client certificate, for servers that ask (tls-auth-clients)
	KeyFile    string `yaml:"key_file"`    // its key
	ServerName string `yaml:"server_name"` // the name to verify; empty: the host connected to
}

// Sentinel names a master and the sentinels that watch it.
type Sentinel struct {
	MasterName string   `yaml:"master_name"`
	Addrs      []string `yaml:"addrs"`
	Password   Secret   `yaml:"password"` // the sentinels' own password, if any
}

// Provider is one LLM endpoint.
type Provider struct {
	Name string `yaml:"name"`
	// Kind is "openai" (any OpenAI-compatible endpoint) or "anthropic".
	Kind string `yaml:"kind"`
	// BaseURL: for openai, the URL up to and including /v1; for anthropic,
	// the API root without /v1. Empty: the provider's public endpoint.
	BaseURL string `yaml:"base_url"`
	// Keys, primary first. A local model with no auth may leave it empty.
	Keys []Secret `yaml:"keys"`
	// CAFile is a PEM file of certificate authorities trusted for the
	// provider's HTTPS endpoint beside the system's (a gateway or a
	// self-hosted model behind an internal CA); empty: the system's only.
	CAFile string `yaml:"ca_file"`
	// MaxConcurrency caps in-flight calls cluster-wide; 0 = no cap.
	MaxConcurrency int `yaml:"max_concurrency"`
	// RPM caps requests per minute cluster-wide; 0 = no cap.
	RPM int `yaml:"rpm"`
	// Timeout bounds one call; default 60s.
	Timeout Duration `yaml:"timeout"`
	// MaxResponseBytes bounds what is read of one answer (or one stream's
	// whole body): past it the call fails as response_too_large (class
	// server). 0 means 2 MiB; at least 65536 when set. Error bodies are
	// always read up to 64 KiB only.
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
}

// Target is one provider and model a route may use.
type Target struct {
	Provider string `yaml:"provider"`
	Model    string `yaml:"model"`
	// MaxInputBytes is the largest prompt (system and messages, in bytes)
	// this target takes; a larger one is not sent to it and fails for it
	// as context_length, so context_window_fallback can take it. 0: no
	// bound.
	MaxInputBytes int `yaml:"max_input_bytes"`
}

func (t Target) String() string { return t.Provider + "/" + t.Model }

// Route is what a step asks for: an ordered list of targets and what to do
// when they fail.
type Route struct {
	Targets []Target `yaml:"targets"`
	// Strategy is "health" (health-weighted, default) or "ordered".
	Strategy string `yaml:"strategy"`
	// HedgeAfter is "p95", a duration, or "off" (default).
	HedgeAfter            string  `yaml:"hedge_after"`
	ContextWindowFallback *Target `yaml:"context_window_fallback"`
	ContentFallback       *Target `yaml:"content_fallback"`
	// FallbackText answers steps with degrade: template when every target failed.
	FallbackText string `yaml:"fallback_text"`
}

// Resilience tunes retries, keys, breakers and health scoring.
type Resilience struct {
	Retry   Retry   `yaml:"retry"`
	Keys    Keys    `yaml:"keys"`
	Breaker Breaker `yaml:"breaker"`
	Health  Health  `yaml:"health"`
}

// Keys tunes key cooldowns after a 429. Defaults: 10s when the provider
// sends no Retry-After, never more than 60s.
type Keys struct {
	DefaultCooldown Duration `yaml:"default_cooldown"`
	MaxCooldown     Duration `yaml:"max_cooldown"`
}

// Retry is the delayed-retry policy. Defaults: base 1s, factor 2, max_delay
// 5m, jitter [0.5, 1.5], max_retries 12.
type Retry struct {
	Base       Duration  `yaml:"base"`
	Factor     float64   `yaml:"factor"`
	MaxDelay   Duration  `yaml:"max_delay"`
	Jitter     []float64 `yaml:"jitter"`
	MaxRetries *int      `yaml:"max_retries"`
}

// Breaker opens a target's circuit. Defaults: 5 consecutive failures, or
// error rate 0.5 over 10s with at least 10 calls; 30s cooldown.
type Breaker struct {
	ConsecutiveFailures int      `yaml:"consecutive_failures"`
	ErrorRate           float64  `yaml:"error_rate"`
	Window              Duration `yaml:"window"`
	MinCalls            int      `yaml:"min_calls"`
	Cooldown            Duration `yaml:"cooldown"`
	// ProbeInterval is how often a worker looks for open targets whose
	// cooldown has passed and probes them itself (a cheap list-models
	// call), so recovery is noticed without user traffic. Default 10s.
	ProbeInterval Duration `yaml:"probe_interval"`
}

// Health scores targets. Defaults: window 5m, weights 0.4/0.3/0.3.
type Health struct {
	Window  Duration      `yaml:"window"`
	Weights HealthWeights `yaml:"weights"`
}

// HealthWeights weigh the parts of a health score; they sum to 1.
type HealthWeights struct {
	Success float64 `yaml:"success"`
	Latency float64 `yaml:"latency"`
	Trend   float64 `yaml:"trend"`
}

// Worker tunes the worker process.
type Worker struct {
	// Concurrency is how many steps run at once; default 50.
	Concurrency int `yaml:"concurrency"`
	// Queues this worker serves, with priorities; default: the declared
	// queues (queues:) with their weights, or else
	// "critical=6,default=3,low=1". Shards come from queues:.
	Queues map[string]int `yaml:"queues"`
	// MetricsAddr serves /metrics and the probes /livez (the process
	// serves) and /readyz (Redis answers, the worker is advertised); empty:
	// off.
	MetricsAddr string `yaml:"metrics_addr"`
	// ShutdownTimeout is how long running steps may finish after SIGTERM;
	// default 30s.
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`
	// PollInterval is how often an idle worker looks for steps: what a
	// new workflow's first steps, a retry and a step another worker made
	// ready wait for at most (1.5 times it); a step's successors are
	// handed off at once (NoHandoffs). Default 1s: each queue a worker
	// serves costs Redis 3 commands a poll.
	PollInterval Duration `yaml:"poll_interval"`
	// RetryPollInterval is how often retries that are due go back to their
	// queue; default 2s (a due retry waits up to this, then up to a poll;
	// each queue costs Redis 4 commands a tick).
	RetryPollInterval Duration `yaml:"retry_poll_interval"`
	// KeyLease is how long a step holds a slot of its concurrency key
	// without its worker renewing it (every third of it): a killed
	// worker's slots free within it. Default 30s; 3s to 10m.
	KeyLease Duration `yaml:"key_lease"`
	// NoHandoffs turns hand-offs off: a step's successor then waits for
	// the next poll of a worker. By default (false) the worker that
	// settles a step runs the steps it made ready at once when it serves
	// their queue and has a free slot (docs/operations.md, "Hand-offs").
	NoHandoffs bool `yaml:"no_handoffs"`
	// Profiling serves Go's runtime profiles on MetricsAddr under
	// /debug/pprof/ (CPU, heap, allocations, goroutines, blocking,
	// mutexes, threads), for `go tool pprof`. Off by default (false): a
	// CPU profile costs the worker while it is taken. The command line is
	// never served (it may hold a password given as a flag), nor an
	// execution trace.
	Profiling bool `yaml:"profiling"`
}

// Limits bound what a submitted workflow may hold.
type Limits struct {
	MaxSteps       int `yaml:"max_steps"`        // default 100
	MaxSpecBytes   int `yaml:"max_spec_bytes"`   // default 1 MiB
	MaxOutputBytes int `yaml:"max_output_bytes"` // default 1 MiB per step output
	// MaxTurns caps a step's max_turns: the model calls of one tool
	// conversation. Default 20, at most 100.
	MaxTurns int `yaml:"max_turns"`
	// MaxMapItems caps a map step's max_items (for_each): the most
	// instances one map may have. Default 10,000, at most 100,000.
	MaxMapItems int `yaml:"max_map_items"`
	// MaxWait caps every wait's timeout (wait_for, approval, a workflow's
	// deadline): a spec asking for more, or for 0s, is refused at submit.
	// 0: the default, 7 days; else at least 1s.
	MaxWait Duration `yaml:"max_wait"`
	// MaxOpenAge is the oldest a workflow may be while open (running,
	// waiting, blocked): it then ends timed_out, with its event and
	// webhook. Retention counts from a workflow's end, so an open one is
	// never expired. 0: the default, 30 days; else at least max_wait.
	MaxOpenAge Duration `yaml:"max_open_age"`
	// MaxTreeWorkflows caps the workflows under one root (the root, its
	// children, theirs): a child past it is not created and its step is
	// dead-lettered (class limit). 0: the default, 10,000; at most
	// 1,000,000.
	MaxTreeWorkflows int `yaml:"max_tree_workflows"`
	// MaxKeptSignals caps the signals kept at once (no step waited on
	// them), across every name: a send past it is refused as over a
	// limit (HTTP 429, CLI exit 7). 0: the default, 10,000; at most
	// 1,000,000.
	MaxKeptSignals int `yaml:"max_kept_signals"`
	// MaxSignalBytes caps one signal's data (HTTP 413, CLI exit 2). 0:
	// the default, 64 KiB; at most max_output_bytes.
	MaxSignalBytes int `yaml:"max_signal_bytes"`
}

// Dashboard bounds what one dashboard process serves.
type Dashboard struct {
	// MaxStreams caps the event streams (SSE followers) served at once:
	// past it a new one is answered 503 with Retry-After. 0: the default,
	// 10,000.
	MaxStreams int `yaml:"max_streams"`
	// MaxStreamsPerClient caps the streams served at once to one client
	// address: past it 429. 0: the default, 100; at most max_streams.
	MaxStreamsPerClient int `yaml:"max_streams_per_client"`
}

// Default is the configuration before any file, variable or flag.
func Default() Config {
	maxRetries, bo, br := retry.DefaultMaxRetries, retry.DefaultBackoff, breaker.DefaultConfig
	return Config{
		Redis:     Redis{Addr: "127.0.0.1:6379", DialTimeout: Duration(5 * time.Second)},
		Retention: Duration(defaults.Retention),
		Resilience: Resilience{
			Retry: Retry{Base: Duration(bo.Base), Factor: bo.Factor, MaxDelay: Duration(bo.Max), Jitter: []float64{bo.JitterLow, bo.JitterHigh},
				MaxRetries: &maxRetries},
			Keys: Keys{DefaultCooldown: Duration(defaults.KeyCooldown), MaxCooldown: Duration(defaults.KeyMaxCooldown)},
			Breaker: Breaker{ConsecutiveFailures: br.ConsecutiveFailures, ErrorRate: br.ErrorRate, Window: Duration(br.Window), MinCalls: br.MinCalls,
				Cooldown: Duration(br.Cooldown), ProbeInterval: Duration(10 * time.Second)},
			Health: Health{Window: Duration(defaults.HealthWindow),
				Weights: HealthWeights{Success: defaults.HealthSuccessWeight, Latency: defaults.HealthLatencyWeight, Trend: defaults.HealthTrendWeight}},
		},
		Worker: Worker{Concurrency: 50, Queues: map[string]int{"critical": 6, "default": 3, "low": 1}, ShutdownTimeout: Duration(30 * time.Second),
			PollInterval: Duration(time.Second), RetryPollInterval: Duration(2 * time.Second),
			KeyLease: Duration(30 * time.Second)},
		Limits: Limits{MaxSteps: defaults.MaxSteps, MaxSpecBytes: defaults.MaxSpecBytes, MaxOutputBytes: defaults.MaxOutputBytes,
			MaxTurns: defaults.MaxTurns, MaxMapItems: defaults.MaxMapItems,
			MaxWait: Duration(defaults.MaxWait), MaxOpenAge: Duration(defaults.MaxOpenAge), MaxTreeWorkflows: defaults.MaxTreeWorkflows,
			MaxKeptSignals: defaults.MaxKeptSignals, MaxSignalBytes: defaults.MaxSignalBytes},
		Dashboard: Dashboard{MaxStreams: defaults.MaxStreams, MaxStreamsPerClient: defaults.MaxStreamsPerClient},
		Events:    Events{Limit: defaults.EventLimit},
		Signals:   Signals{Keep: Duration(defaults.SignalKeep)},
	}
}

// fillDefaults sets per-element defaults the file may leave out.
func (c *Config) fillDefaults() {
	for i := range c.Providers {
		if c.Providers[i].Timeout == 0 {
			c.Providers[i].Timeout = Duration(defaults.ProviderTimeout)
		}
	}
	for name, r := range c.Routes {
		if r.Strategy == "" {
			r.Strategy = "health"
		}
		if r.HedgeAfter == "" {
			r.HedgeAfter = "off"
		}
		c.Routes[name] = r
	}
}

// Provider returns the provider named name.
func (c *Config) Provider(name string) (Provider, bool) {
	for _, p := range c.Providers {
		if p.Name == name {
			return p, true
		}
	}
	return Provider{}, false
}

// RouteNames lists the routes in order.
func (c *Config) RouteNames() []string {
	names := make([]string, 0, len(c.Routes))
	for n := range c.Routes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// FieldError is one configuration problem.
type FieldError struct {
	Source string // file name, when known
	Line   int    // line in Source, when known
	Field  string // e.g. providers[1].timeout
	Msg    string
}

func (e *FieldError) Error() string { return problem.Format(e.Source, e.Line, e.Field, e.Msg) }

// redactURL hides a URL's password.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable URL)"
	}
	if u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
