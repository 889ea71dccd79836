// Package metrics exposes agentq's Prometheus metrics (docs/operations.md): LLM
// calls, tokens, fallbacks, breaker states, health scores, key events,
// steps, workflows, dead letters, webhook deliveries and budgets, plus
// asynq's queue collector. Label values are bounded: providers, models,
// routes, classes, states, events, budget names and key fingerprints;
// never workflow ids, never keys.
package metrics

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	asynqmetrics "github.com/hibiken/asynq/x/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// Metrics holds the collectors; it is an router.Observer.
type Metrics struct {
	reg          *prometheus.Registry
	llmRequests  *prometheus.CounterVec
	llmDuration  *prometheus.HistogramVec
	llmTokens    *prometheus.CounterVec
	fallbacks    *prometheus.CounterVec
	keyEvents    *prometheus.CounterVec
	steps        *prometheus.CounterVec
	handoffs     prometheus.Counter
	workflows    *prometheus.CounterVec
	deadLetters  *prometheus.CounterVec
	reconciled   *prometheus.CounterVec
	webhooks     *prometheus.CounterVec
	budgetSpent  *prometheus.CounterVec
	budgetNo     *prometheus.CounterVec
	llmCost      *prometheus.CounterVec
	scheduleRuns *prometheus.CounterVec
	prices       map[string]router.Price // by "provider/model"; set before calls are made (SetPrices)
	keys         *keyCollector
	streams      *scrapeGauge // agentq_dashboard_event_streams
	kept         *scrapeGauge // agentq_signals_kept
	mcp          *mcpMetrics  // the MCP servers' calls (mcp.go)
}

// SetPrices makes Call count what each answered call cost
// (agentq_llm_cost_total) at these prices per million tokens, by
// "provider/model". Call it before the router makes calls.
func (m *Metrics) SetPrices(p map[string]router.Price) { m.prices = p }

// TargetState is what the gauges read of a target at scrape time.
type TargetState struct {
	Provider, Model string
	Breaker         breaker.State
	Health          float64
}

// New registers every collector. inspector (nil: none) feeds asynq's
// queue metrics; targets (nil: none) feeds the breaker and health gauges.
func New(inspector *asynq.Inspector, targets func() []TargetState) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.llmRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentq_llm_requests_total",
		Help: "LLM calls by target and outcome class (ok on success)."}, []string{"provider", "model", "class"})
	m.llmDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentq_llm_request_duration_seconds",
		Help: "LLM call duration.", Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 20, 40, 60, 120}}, []string{"provider", "model"})
	m.llmTokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentq_llm_tokens_total",
		Help: "Tokens the providers reported, by kind (prompt, completion)."}, []string{"provider", "model", "kind"})
	m.fallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentq_fallbacks_total",
		Help: "Answers that did not come from a route's first choice; to=template for degraded answers."}, []string{"route", "from", "to"})
	m.keyEvents = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentq_key_events_total",
		Help: "API key events by key fingerprint: cooldown, disabled, rotated."}, []string{"provider", "key", "event"})
	m.handoffs = prometheus.NewCounter(prometheus.CounterOpts{Name: "agentq_handoffs_total",
		Help: "Step attempts run as hand-offs: on the worker that settled their predecessor, without waiting for its poll."})
	m.steps = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentq_steps_total",
		Help: "Settled steps, failed attempts and waits by route and status (done, degraded, dead, retrying; waiting: for a person or a signal; throttled: for a concurrency key's slot; unrecorded: an answer kept in memory because it could not be recorded)."}, []string{"route", "status"})
	m.workflows = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentq_workflows_total",
		Help: "Workflows that completed, became blocked or timed out (their deadline), by status; a cancel or a discarded dead letter ends a workflow outside the workers and is not counted here."}, []string{"status"})
	m.deadLetters = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentq_dead_letters_total",
		Help: "Dead-lettered steps by error class."}, []string{"class"})
	m.reconciled = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentq_reconciled_steps_total",
		Help: "Steps the reconciler settled dead or enqueued again after asynq ended their task without a result, by reason."}, []string{"reason"})
	m.webhooks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentq_webhook_deliveries_total",
		Help: "Webhook delivery attempts by event and result (delivered, retrying, dead: archived after its retries, refused: by the SSRF guard)."}, []string{"event", "result"})
	m.budgetSpent = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentq_budget_spent_total",
		Help: "What calls spent on each budget, by unit (tokens; usd in the prices' currency), as settled after each call."}, []string{"budget", "unit"})
	m.budgetNo = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentq_budget_refused_total",
		Help: "Calls not sent because a budget could not take them (class budget_exceeded)."}, []string{"budget"})
	m.llmCost = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentq_llm_cost_total",
		Help: "What answered calls cost at the configured prices (their currency), by provider and model."}, []string{"provider", "model"})
	m.scheduleRuns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentq_schedule_runs_total",
		Help: "Workflows schedules submitted, by schedule and result: submitted, or existing (the slot's run was submitted already, e.g. by a replica that held the lease before)."}, []string{"schedule", "result"})
	m.reg.MustRegister(m.llmRequests, m.llmDuration, m.llmTokens, m.llmCost, m.fallbacks, m.keyEvents, m.steps, m.handoffs, m.workflows, m.deadLetters, m.reconciled, m.webhooks,
		m.budgetSpent, m.budgetNo, m.scheduleRuns,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if targets != nil {
		m.reg.MustRegister(&targetCollector{targets: targets})
	}
	m.keys = &keyCollector{}
	m.reg.MustRegister(m.keys)
	m.streams, m.kept = newStreamsGauge(), newKeptSignalsGauge()
	m.reg.MustRegister(m.streams, m.kept)
	m.mcp = newMCPMetrics(m.reg)
	if inspector != nil {
		m.reg.MustRegister(asynqmetrics.NewQueueMetricsCollector(inspector))
	}
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Call implements router.Observer.
func (m *Metrics) Call(_ string, t router.Target, _ string, class retry.Class, dur time.Duration, usage llmclient.Usage) {
	p := t.Provider.Name()
	m.llmRequests.WithLabelValues(p, t.Model, string(class)).Inc()
	m.llmDuration.WithLabelValues(p, t.Model).Observe(dur.Seconds())
	if usage.PromptTokens > 0 {
		m.llmTokens.WithLabelValues(p, t.Model, "prompt").Add(float64(usage.PromptTokens))
	}
	if usage.CompletionTokens > 0 {
		m.llmTokens.WithLabelValues(p, t.Model, "completion").Add(float64(usage.CompletionTokens))
	}
	if pr, ok := m.prices[t.String()]; ok && usage.PromptTokens+usage.CompletionTokens > 0 {
		m.llmCost.WithLabelValues(p, t.Model).Add((float64(usage.PromptTokens)*pr.PromptPerMTok + float64(usage.CompletionTokens)*pr.CompletionPerMTok) / 1e6)
	}
}

// Fallback implements router.Observer.
func (m *Metrics) Fallback(route, from, to string) {
	m.fallbacks.WithLabelValues(route, from, to).Inc()
}

// KeyEvent implements router.Observer; key is a fingerprint.
func (m *Metrics) KeyEvent(provider, key, event string) {
	m.keyEvents.WithLabelValues(provider, key, event).Inc()
}

// Step counts a step event from the handler, or the end of a workflow by
// its deadline (an event with no step).
func (m *Metrics) Step(e engine.StepEvent) {
	if e.Step == "" {
		m.workflows.WithLabelValues(e.WorkflowState).Inc()
		return
	}
	if e.Reconciled != "" {
		m.reconciled.WithLabelValues(e.Reconciled).Inc()
	}
	if e.State == "queued" {
		return // enqueued again by the reconciler: not an outcome
	}
	status := e.State
	if e.Degraded {
		status = "degraded"
		m.fallbacks.WithLabelValues(e.Route, "all", "template").Inc()
	}
	m.steps.WithLabelValues(e.Route, status).Inc()
	if e.HandedOff {
		m.handoffs.Inc()
	}
	if e.State == "dead" {
		m.deadLetters.WithLabelValues(string(e.Class)).Inc()
	}
	switch e.WorkflowState {
	case record.StateCompleted, record.StateBlocked:
		if e.State != "retrying" {
			m.workflows.WithLabelValues(e.WorkflowState).Inc()
		}
	}
}

// BudgetSpent implements router.BudgetObserver.
func (m *Metrics) BudgetSpent(budget, unit string, amount float64) {
	m.budgetSpent.WithLabelValues(budget, unit).Add(amount)
}

// BudgetRefused implements router.BudgetObserver.
func (m *Metrics) BudgetRefused(budget string) {
	m.budgetNo.WithLabelValues(budget).Inc()
}

// ScheduleFired counts one slot a schedule submitted (schedule.Options.Fired):
// existing when its workflow had been submitted already.
func (m *Metrics) ScheduleFired(schedule string, existing bool) {
	result := "submitted"
	if existing {
		result = "existing"
	}
	m.scheduleRuns.WithLabelValues(schedule, result).Inc()
}

// Webhook counts one webhook delivery attempt (webhook.Options.Observe).
func (m *Metrics) Webhook(event, result string) {
	m.webhooks.WithLabelValues(event, result).Inc()
}

type targetCollector struct{ targets func() []TargetState }

var (
	breakerDesc = prometheus.NewDesc("agentq_breaker_state", "Circuit breaker state: 0 closed, 1 half-open, 2 open.", []string{"provider", "model"}, nil)
	healthDesc  = prometheus.NewDesc("agentq_target_health_score", "Target health score in [0, 1].", []string{"provider", "model"}, nil)
)

func (c *targetCollector) Describe(ch chan<- *prometheus.Desc) { ch <- breakerDesc; ch <- healthDesc }

func (c *targetCollector) Collect(ch chan<- prometheus.Metric) {
	for _, t := range c.targets() {
		ch <- prometheus.MustNewConstMetric(breakerDesc, prometheus.GaugeValue, float64(t.Breaker), t.Provider, t.Model)
		ch <- prometheus.MustNewConstMetric(healthDesc, prometheus.GaugeValue, t.Health, t.Provider, t.Model)
	}
}

// KeyLoads reads the concurrency keys' top loads and totals
// (store.KeyLoads).
type KeyLoads func(ctx context.Context, top int) (loads []store.KeyLoad, inflight, waiting int64, err error)

// WatchKeys makes the concurrency key gauges read f at scrape time.
func (m *Metrics) WatchKeys(f KeyLoads) {
	m.keys.mu.Lock()
	defer m.keys.mu.Unlock()
	m.keys.loads = f
}

// topKeys bounds the concurrency keys named in the gauges: the busiest by
// steps in flight and by steps waiting; every other key is summed as
// OtherKeys.
const topKeys = 20

// OtherKeys is the key label of the keys beyond the top ones, summed.
const OtherKeys = "_other"

type keyCollector struct {
	mu    sync.Mutex
	loads KeyLoads
}

var (
	keyInFlightDesc = prometheus.NewDesc("agentq_concurrency_key_in_flight",
		"Steps holding a slot of a concurrency key (the busiest keys; key=\"_other\" sums the rest).", []string{"key"}, nil)
	keyWaitingDesc = prometheus.NewDesc("agentq_concurrency_key_waiting",
		"Steps waiting for a slot of a concurrency key (the keys with the most; key=\"_other\" sums the rest).", []string{"key"}, nil)
)

func (c *keyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- keyInFlightDesc
	ch <- keyWaitingDesc
}

// Collect reads the loads within a second; a scrape while Redis is away
// has no key gauges.
func (c *keyCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	f := c.loads
	c.mu.Unlock()
	if f == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	loads, inflight, waiting, err := f(ctx, topKeys)
	if err != nil {
		return
	}
	var namedIn, namedWait int64
	for _, l := range loads {
		ch <- prometheus.MustNewConstMetric(keyInFlightDesc, prometheus.GaugeValue, float64(l.InFlight), l.Key)
		ch <- prometheus.MustNewConstMetric(keyWaitingDesc, prometheus.GaugeValue, float64(l.Waiting), l.Key)
		namedIn += l.InFlight
		namedWait += l.Waiting
	}
	ch <- prometheus.MustNewConstMetric(keyInFlightDesc, prometheus.GaugeValue, float64(inflight-namedIn), OtherKeys)
	ch <- prometheus.MustNewConstMetric(keyWaitingDesc, prometheus.GaugeValue, float64(waiting-namedWait), OtherKeys)
}
