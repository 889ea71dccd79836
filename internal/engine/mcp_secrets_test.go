package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// An HTTP server's header secret and a stdio server's env secret, each
// echoed back by a tool (and the env one said on the server's stderr),
// with the event log keeping content: no piece of either is in Redis
// (outputs, tool calls, durable calls, the event log), the worker's logs,
// /metrics, the dashboard or the CLI's output. The model read each as
// [redacted].
func TestNoMCPSecretAnywhere(t *testing.T) {
	t.Parallel() // its own database, worker and servers: it runs beside the others
	const hdrSecret, envSecret = "hq7Zx2vk9Lm4tq1Wp3", "Rz8yN3kq5Jd7Vb2Xc6"
	var logs testenv.Buffer
	dir := t.TempDir()
	web := mcpHTTP(t, t.TempDir())
	web.Headers = map[string]config.Secret{"Authorization": "Bearer " + hdrSecret, "X-Api-Key": hdrSecret}
	e := testenv.Start(t, testenv.Options{Metrics: true, LogTo: &logs, NoWorker: true,
		Scenario: chaosllm.Scenario{ToolScript: []chaosllm.ScriptTurn{{Calls: []chaosllm.ScriptCall{
			call("mcp__web__header", map[string]any{"name": "Authorization"}),
			call("mcp__web__header", map[string]any{"name": "X-Api-Key"}),
			call("mcp__local__env", map[string]any{"name": "API_TOKEN"}),
		}}}},
		Configure: withMCP(map[string]config.MCPServer{"web": web, "local": mcpStdio(dir, map[string]config.Secret{"API_TOKEN": envSecret})})})
	e.Config.Events.Content = true
	e.StartWorker(t)
	var ids []string
	for _, d := range dialects {
		ids = append(ids, e.Submit(t, e.Spec(toolStep(d.route, `["mcp:web/header", "mcp:local/env"]`, ""))))
	}
	for _, id := range ids {
		wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
		if want := "final answer using results: Authorization: [redacted]; X-Api-Key: [redacted]; API_TOKEN=[redacted]"; wf.State != store.StateCompleted || wf.Steps[0].Output != want {
			t.Fatalf("workflow %s, output %q, want %q", wf.State, wf.Steps[0].Output, want)
		}
	}
	// the server's stderr is read and logged apart from its replies
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return strings.Contains(logs.String(), `"line":"env: read API_TOKEN=[redacted]"`), "the server's stderr line is not in the log, redacted"
	})
	huntSecrets(t, e, &logs, ids, []string{hdrSecret, envSecret})
}
