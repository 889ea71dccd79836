// Package mcptool is the client side of the Model Context Protocol for a
// worker: the MCP servers of its configuration (mcp_servers) as sources of
// tools for prompt steps (engine.MCPServers), over the official Go SDK. A
// stdio server is started once per worker, on first use, and restarted
// when it exits (with backoff); an HTTP server is reached over MCP's
// streamable HTTP transport with the configured headers. Each server has
// its own per-call timeout, concurrency limit and breaker; its tool list is
// kept until it says the list changed. Its stderr goes to the worker's log
// line by line, scrubbed of the configuration's secrets and bounded. See
// docs/mcp.md.
package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/router"
)

// Options configure a Pool.
type Options struct {
	// Logger hears the servers' stderr and lifecycle; nil: discarded.
	Logger *slog.Logger
	// Redact removes the configuration's secrets from text (stderr lines,
	// errors); nil: nothing is removed.
	Redact func(string) string
	// MaxResultBytes is limits.max_output_bytes: a message from a server
	// longer than MaxFrameBytes of it closes the connection (the call
	// fails as bad_request). 0: config's default.
	MaxResultBytes int
	// Breakers are the worker's call breakers, shared with the fleet
	// (app.App.CallBreakers): each server's is config.MCPBreaker's name.
	// nil: no breaker (every call is sent).
	Breakers *router.Breakers
	// Observer hears every call and start (metrics); nil: none.
	Observer Observer
}

// Pool is a worker's MCP servers. It implements engine.MCPServers.
type Pool struct {
	servers map[string]*server
}

var _ engine.MCPServers = (*Pool)(nil)

// New returns the servers of a configuration (none started yet).
func New(servers map[string]config.MCPServer, o Options) *Pool {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Redact == nil {
		o.Redact = func(s string) string { return s }
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = config.Default().Limits.MaxOutputBytes
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	p := &Pool{servers: make(map[string]*server, len(servers))}
	for name, cfg := range servers {
		p.servers[name] = newServer(name, cfg, &o)
	}
	return p
}

// errNoServer is a server the pool does not have.
var errNoServer = errors.New("no such MCP server on this worker")

// Has implements engine.MCPServers.
func (p *Pool) Has(server string) bool { return p != nil && p.servers[server] != nil }

// SideEffects implements engine.MCPServers.
func (p *Pool) SideEffects(server, tool string) bool {
	s := p.servers[server]
	return s != nil && s.cfg.SideEffects.Has(tool)
}

// Tools implements engine.MCPServers.
func (p *Pool) Tools(ctx context.Context, server string) ([]engine.MCPTool, error) {
	s := p.servers[server]
	if s == nil {
		return nil, errNoServer
	}
	return s.listTools(ctx)
}

// Call implements engine.MCPServers.
func (p *Pool) Call(ctx context.Context, server, tool string, args json.RawMessage, started func(context.Context) error) (engine.MCPResult, error) {
	s := p.servers[server]
	if s == nil {
		return engine.MCPResult{}, errNoServer
	}
	return s.call(ctx, tool, args, started)
}

// Close stops every server (a stdio server's process is asked to end, then
// killed after a few seconds) and waits for them, at most until ctx ends.
func (p *Pool) Close(ctx context.Context) {
	if p == nil {
		return
	}
	var wg sync.WaitGroup
	for _, s := range p.servers {
		wg.Add(1)
		go func() { defer wg.Done(); s.close() }()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// stopGrace is how long a stdio server has to end after its stdin closes
// before it is killed.
const stopGrace = 3 * time.Second
