package app

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/engine"
)

// Producer makes App.Client: the producer client, checking specs against
// the configured routes (all routes are accepted when none are configured:
// the worker's configuration is the one that counts).
func Producer() Part {
	return Part{name: "Producer", build: func(_ context.Context, a *App) error {
		a.Client = engine.NewClient(a.Redis, ClientOptions(a.Config))
		return nil
	}}
}

// ClientOptions are the producer client's options from a configuration.
func ClientOptions(cfg config.Config) engine.ClientOptions {
	o := engine.ClientOptions{Retention: cfg.Retention.D(), MaxRetries: cfg.Resilience.Retry.MaxRetries,
		Limits: engine.Limits{MaxSteps: cfg.Limits.MaxSteps, MaxSpecBytes: cfg.Limits.MaxSpecBytes, MaxTurns: cfg.Limits.MaxTurns, MaxMapItems: cfg.Limits.MaxMapItems}}
	if len(cfg.Routes) > 0 {
		o.Routes = cfg.RouteNames()
	}
	o.Webhooks = Webhooks(cfg)
	return o
}

// Clients are the Redis-backed parts the producer commands use.
type Clients struct {
	Redis  redis.UniversalClient
	Client *engine.Client
	app    *App
}

// Connect is Build with the Producer part: Redis (one try) and the
// producer client on it.
func Connect(ctx context.Context, cfg config.Config) (*Clients, error) {
	a, err := Build(ctx, cfg, Options{}, Producer())
	if err != nil {
		return nil, err
	}
	return &Clients{Redis: a.Redis, Client: a.Client, app: a}, nil
}

// Close releases the clients.
func (c *Clients) Close() error { return c.app.Close() }

// Prices converts the configured price table for engine.Cost.
func Prices(cfg config.Config) map[string]engine.Price {
	out := make(map[string]engine.Price, len(cfg.Prices))
	for t, p := range cfg.Prices {
		out[t] = engine.Price{PromptPerMTok: p.Prompt, CompletionPerMTok: p.Completion}
	}
	return out
}

// CostByProvider is " (oa 0.0100, an 0.0023)": a workflow's priced cost by
// who answered (engine.CostByProvider), for status and the workflow page;
// empty when one paid all.
func CostByProvider(wf *engine.Workflow) string {
	by := engine.CostByProvider(wf)
	if len(by) < 2 {
		return ""
	}
	names := make([]string, 0, len(by))
	for p := range by {
		names = append(names, p)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, p := range names {
		parts[i] = fmt.Sprintf("%s %.4f", p, by[p])
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
