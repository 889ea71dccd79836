package client

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"time"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/metrics"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/store"
)

// monitor reads the workers' shared breaker and health state.
type monitor struct {
	breakers *store.Breakers
	health   *router.Health
	metrics  http.Handler
	gauges   *metrics.Metrics
}

// Metrics serves the queues' Prometheus gauges as the workers' Redis
// holds them (only Over's client has them; others answer 404).
func (c *Client) Metrics() http.Handler {
	if c.mon == nil {
		return http.NotFoundHandler()
	}
	return c.mon.metrics
}

// Target is one configured target as the workers share its state: its
// breaker and its health score (0 to 1).
type Target struct {
	Provider, Model, Breaker string
	Health                   float64
}

// ErrNoMonitor is returned by Targets on a client that does not read the
// workers' shared state (only Over's does).
var ErrNoMonitor = errors.New("this client does not read the workers' breakers and health")

// Targets lists every target of the configured routes once, sorted, with
// its breaker's state and its health as the workers share them.
func (c *Client) Targets(ctx context.Context) ([]Target, error) {
	if c.mon == nil {
		return nil, ErrNoMonitor
	}
	names := make([]string, len(c.cfg.Providers))
	for i, p := range c.cfg.Providers {
		names[i] = p.Name
	}
	brk, err := c.mon.breakers.Load(ctx, names)
	if err != nil {
		return nil, err
	}
	_ = c.mon.health.Sync(ctx, names) // a score from what was read before is still a score
	var out []Target
	seen := map[string]bool{}
	for _, rn := range c.cfg.RouteNames() {
		for _, t := range c.cfg.Routes[rn].Targets {
			if seen[t.String()] {
				continue
			}
			seen[t.String()] = true
			st := brk[t.Provider][t.Model]
			out = append(out, Target{Provider: t.Provider, Model: t.Model, Breaker: st.State.String(), Health: c.mon.health.Score(t.Provider, t.Model)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Provider+out[i].Model < out[j].Provider+out[j].Model })
	return out, nil
}

// MCPServer is one configured MCP server as the workers share its state:
// its transport ("stdio" or "http": never its command, URL or headers,
// which may hold secrets) and its breaker, with the time an open one lets
// a probe through.
type MCPServer struct {
	Name, Transport, Breaker string
	OpenUntil                *time.Time
}

// MCPServers lists the configured MCP servers, sorted by name, with their
// breakers as the workers share them.
func (c *Client) MCPServers(ctx context.Context) ([]MCPServer, error) {
	if c.mon == nil {
		return nil, ErrNoMonitor
	}
	names := c.cfg.MCPServerNames()
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = config.MCPBreaker(n)
	}
	brk, err := c.mon.breakers.Load(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make([]MCPServer, len(names))
	for i, n := range names {
		b := brk[keys[i]][""]
		s := MCPServer{Name: n, Transport: "http", Breaker: b.State.String()}
		if c.cfg.MCPServers[n].Stdio() {
			s.Transport = "stdio"
		}
		if b.State != breaker.Closed && !b.OpenUntil.IsZero() {
			u := b.OpenUntil.UTC()
			s.OpenUntil = &u
		}
		out[i] = s
	}
	return out, nil
}
