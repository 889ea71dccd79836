package app

import (
	"context"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// Producer makes App.Client: the producer client, checking specs against
// the configured routes (all routes are accepted when none are configured:
// the worker's configuration is the one that counts).
func Producer() Part {
	return Part{name: "Producer", build: func(_ context.Context, a *App) error {
		a.Client = producer.NewClient(a.Redis, ClientOptions(a.Config))
		return nil
	}}
}

// ClientOptions are the producer client's options from a configuration.
func ClientOptions(cfg config.Config) producer.ClientOptions {
	o := producer.ClientOptions{Retention: cfg.Retention.D(), MaxOpenAge: cfg.Limits.MaxOpenAge.D(), MaxRetries: cfg.Resilience.Retry.MaxRetries,
		Limits: spec.Limits{MaxSteps: cfg.Limits.MaxSteps, MaxSpecBytes: cfg.Limits.MaxSpecBytes, MaxTurns: cfg.Limits.MaxTurns, MaxMapItems: cfg.Limits.MaxMapItems,
			MaxWait: cfg.Limits.MaxWait.D()}}
	if len(cfg.Routes) > 0 {
		o.Routes = cfg.RouteNames()
	}
	o.Webhooks = Webhooks(cfg)
	o.EventLimit = cfg.Events.EventLimit()
	o.SignalKeep = cfg.Signals.Keep.D()
	o.MaxSignalBytes, o.MaxKeptSignals = cfg.Limits.MaxSignalBytes, cfg.Limits.MaxKeptSignals
	o.Shards = cfg.Shards()
	o.Durability = Durability(cfg)
	return o
}

// Durability is the configuration's redis.durability for the store
// (Replicas 0: off).
func Durability(cfg config.Config) store.Durability {
	d := cfg.Redis.Durability
	if d == nil {
		return store.Durability{}
	}
	return store.Durability{Replicas: d.Replicas, Timeout: d.Timeout.D()}
}

// Prices converts the configured price table for flow.Cost.
func Prices(cfg config.Config) map[string]flow.Price {
	out := make(map[string]flow.Price, len(cfg.Prices))
	for t, p := range cfg.Prices {
		out[t] = flow.Price{PromptPerMTok: p.Prompt, CompletionPerMTok: p.Completion}
	}
	return out
}
