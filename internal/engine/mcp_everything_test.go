package engine_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// The reference server, @modelcontextprotocol/server-everything (the
// version docs/mcp.md pins), started
// by npx as docs/mcp.md shows it: a step calls its echo and get-sum and
// uses their results, and its get-env shows the server was given its env
// (the secret read back as [redacted]) with PATH and HOME, not the
// worker's environment. Skipped where npx is not on PATH, except in CI.
func TestMCPServerEverything(t *testing.T) {
	if _, err := exec.LookPath("npx"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("npx is not on PATH: CI must have Node.js to run the reference MCP server")
		}
		t.Skip("npx is not on PATH")
	}
	const secret = "Qw4Ty8Ui2Op6As0Df3"
	t.Setenv("AGENTQ_WORKER_ONLY", "not-for-the-server")
	everything := config.MCPServer{Command: []string{"npx", "-y", "@modelcontextprotocol/server-everything@2026.8.31"},
		Env: map[string]config.Secret{"EVERYTHING_TOKEN": secret}, Timeout: config.Duration(2 * time.Minute), Concurrency: 4}
	e := testenv.Start(t, testenv.Options{
		Scenario: chaosllm.Scenario{ToolScript: []chaosllm.ScriptTurn{{Calls: []chaosllm.ScriptCall{
			call("mcp__everything__echo", map[string]any{"message": "hello from agentq"}),
			call("mcp__everything__get-sum", map[string]any{"a": 1200, "b": 800}),
			call("mcp__everything__get-env", nil),
		}}}},
		Configure: withMCP(map[string]config.MCPServer{"everything": everything})})
	src := strings.Replace(toolStep("solo", `["mcp:everything/echo", "mcp:everything/get-sum", "mcp:everything/get-env"]`, ""), "timeout: 20s", "timeout: 3m", 1)
	wf := e.Wait(t, e.Submit(t, e.Spec(src)), 4*time.Minute, store.StateCompleted, store.StateBlocked, store.StateFailed)
	s := wf.Steps[0]
	if wf.State != store.StateCompleted {
		t.Fatalf("workflow %s, step %+v", wf.State, s)
	}
	for _, want := range []string{"Echo: hello from agentq", "2000", `"EVERYTHING_TOKEN": "[redacted]"`, `"PATH"`} {
		if !strings.Contains(s.Output, want) {
			t.Errorf("output lacks %q: %s", want, s.Output)
		}
	}
	if strings.Contains(s.Output, "AGENTQ_WORKER_ONLY") || strings.Contains(s.Output, secret) {
		t.Errorf("the server saw the worker's environment or the secret shows: %s", s.Output)
	}
}
