package mcptool

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os/exec"
	"testing"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/mcptool/mcptest"
)

// What one tool call costs the worker, by where the tool runs: a Go tool
// (engine.ToolFunc: a function call, its result encoded), and an MCP tool
// over stdio and over streamable HTTP (the SDK's client and server,
// loopback), the server up already; and, where npx is installed, the
// reference Node.js server over stdio. What the engine adds around either
// (the arguments' schema check, the durable result, the model's turn) is
// the same for both.
//
//	go test -run '^$' -bench BenchmarkToolCall -benchtime 2000x ./internal/mcptool
func BenchmarkToolCall(b *testing.B) {
	args := json.RawMessage(`{"text":"north: 1200"}`)
	b.Run("go", func(b *testing.B) {
		var fn engine.ToolFunc = func(_ context.Context, args json.RawMessage) (any, error) {
			var a struct{ Text string }
			if err := json.Unmarshal(args, &a); err != nil {
				return nil, err
			}
			return map[string]string{"text": a.Text}, nil
		}
		ctx := context.Background()
		for b.Loop() {
			v, err := fn(ctx, args)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := json.Marshal(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	hs := httptest.NewServer(mcptest.Handler(""))
	b.Cleanup(hs.Close)
	servers := map[string]config.MCPServer{
		"mcp_stdio": stdioServer(""),
		"mcp_http":  {URL: hs.URL, Timeout: config.Duration(60e9), Concurrency: 4},
	}
	if _, err := exec.LookPath("npx"); err == nil { // the reference server, as docs/mcp.md pins it
		servers["mcp_everything"] = config.MCPServer{Command: []string{"npx", "-y", "@modelcontextprotocol/server-everything@2026.8.31"},
			Timeout: config.Duration(120e9), Concurrency: 4}
	}
	for name, srv := range servers {
		tool, args, want := "echo", args, "north: 1200"
		if name == "mcp_everything" {
			tool, args, want = "echo", json.RawMessage(`{"message":"north: 1200"}`), "Echo: north: 1200"
		}
		b.Run(name, func(b *testing.B) {
			p := New(map[string]config.MCPServer{"s": srv}, Options{})
			b.Cleanup(func() { p.Close(context.Background()) })
			ctx := context.Background()
			if _, err := p.Call(ctx, "s", tool, args, nil); err != nil { // started, handshake made
				b.Fatal(err)
			}
			for b.Loop() {
				r, err := p.Call(ctx, "s", tool, args, nil)
				if err != nil || r.Content != want {
					b.Fatal(r, err)
				}
			}
		})
	}
}
