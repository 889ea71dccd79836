package engine_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/mcptool"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/retry"
)

// An MCP server's breaker is the fleet's: a worker that cannot reach the
// server opens it in Redis (under config.MCPBreaker's name, where the
// dashboard reads it), and another worker's servers then refuse a call at
// once, without dialing.
func TestAnMCPServersBreakerIsTheFleets(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	servers := map[string]config.MCPServer{"down": {URL: refused, Timeout: config.Duration(5 * time.Second), Concurrency: 1}}
	e := testenv.Start(t, testenv.Options{Configure: func(c *config.Config) {
		c.MCPServers = servers
		c.Resilience.Breaker.ConsecutiveFailures = 1
	}})
	id := e.Submit(t, e.Spec(toolStep(dialects[0].route, `["mcp:down"]`, "")))
	name := config.MCPBreaker("down")
	shared := store.NewBreakers(e.Redis)
	poll.Until(t, 30*time.Second, func() (bool, string) {
		st, err := shared.Load(t.Context(), []string{name})
		b := st[name][""]
		return err == nil && b.State == breaker.Open, fmt.Sprintf("the shared breaker %s is %s (%v)", name, b.State, err)
	})

	// another worker: its breakers read the fleet's, and its call fails
	// at once as the breaker's
	other := router.NewBreakers(shared, breaker.DefaultConfig, nil, nil, nil)
	if err := other.Refresh(t.Context(), []string{name}); err != nil {
		t.Fatal(err)
	}
	p := mcptool.New(servers, mcptool.Options{Breakers: other})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Close(ctx)
	})
	if _, err := p.Tools(t.Context(), "down"); err == nil || !strings.Contains(err.Error(), "breaker is open") || retry.ClassOf(err) != retry.Network {
		t.Fatalf("another worker's list of the server: %v (class %s), want its open breaker's network error", err, retry.ClassOf(err))
	}
	if _, err := e.Client.Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}
}
