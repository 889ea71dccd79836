package app

import (
	"context"
	"time"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/metrics"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/store"
)

// Monitor makes what a reader of the workers' shared state uses (the
// dashboard): App.Breakers (the breakers' states as the workers share
// them), App.Health (scores from the workers' counts; it records nothing
// itself) and App.Metrics (the queues' metrics). No provider, key or
// router: a monitor holds no provider secret.
func Monitor() Part {
	return Part{name: "Monitor", build: func(_ context.Context, a *App) error {
		a.Breakers = store.NewBreakers(a.Redis)
		h, err := router.NewHealth(readOnlyHealth{store.NewHealthStats(a.Redis)}, healthConfig(a.Config), nil, a.Logger)
		if err != nil {
			return err
		}
		a.Health = h
		a.Metrics = metrics.New(a.inspector(), nil)
		a.Metrics.WatchKeptSignals(store.New(a.Redis, a.Config.Retention.D(), nil).KeptSignalCount)
		return nil
	}}
}

func healthConfig(cfg config.Config) router.HealthConfig {
	hc := cfg.Resilience.Health
	return router.HealthConfig{Window: hc.Window.D(),
		Weights: router.HealthWeights{Success: hc.Weights.Success, Latency: hc.Weights.Latency, Trend: hc.Weights.Trend}}
}

// KeyStore adapts the store's shared key state to llmclient's interface.
type KeyStore struct{ *store.KeyState }

// Load implements router.KeyStateStore.
func (k KeyStore) Load(ctx context.Context, providers []string) (map[string]map[string]router.KeyStatus, error) {
	st, err := k.KeyState.Load(ctx, providers)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]router.KeyStatus, len(st))
	for p, keys := range st {
		m := make(map[string]router.KeyStatus, len(keys))
		for id, s := range keys {
			m[id] = router.KeyStatus{CoolUntil: s.CoolUntil, Disabled: s.Disabled}
		}
		out[p] = m
	}
	return out, nil
}

// HealthStore adapts the store's health counts to llmclient's interface.
type HealthStore struct{ *store.HealthStats }

// Add implements router.HealthStore.
func (h HealthStore) Add(ctx context.Context, batches []router.HealthBatch, ttl time.Duration) error {
	adds := make([]store.HealthAdd, len(batches))
	for i, b := range batches {
		adds[i] = store.HealthAdd{Provider: b.Provider, Bucket: b.Bucket, Models: b.Models}
	}
	return h.HealthStats.Add(ctx, adds, ttl)
}

// readOnlyHealth reads the workers' health counts and adds nothing.
type readOnlyHealth struct{ *store.HealthStats }

func (readOnlyHealth) Add(context.Context, []router.HealthBatch, time.Duration) error { return nil }
