package engine_test

import (
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/mcptool/mcptest"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/retry"
)

// the test binary is the MCP test server when a worker starts it as one
func init() { mcptest.Main() }

// mcpStdio is this test binary as a stdio MCP server logging its calls in
// dir, with env besides.
func mcpStdio(dir string, env map[string]config.Secret) config.MCPServer {
	e := map[string]config.Secret{mcptest.Env: "1", mcptest.DirEnv: config.Secret(dir)}
	for k, v := range env {
		e[k] = v
	}
	return config.MCPServer{Command: []string{os.Args[0], "-test.run=^$"}, Env: e,
		Timeout: config.Duration(10 * time.Second), Concurrency: 4}
}

// mcpHTTP is the MCP test server over streamable HTTP, logging in dir,
// until the test ends.
func mcpHTTP(t *testing.T, dir string) config.MCPServer {
	h := mcptest.Handler(dir)
	hs := httptest.NewServer(h)
	t.Cleanup(func() { hs.Close(); h.Close() })
	return config.MCPServer{URL: hs.URL, Timeout: config.Duration(10 * time.Second), Concurrency: 4}
}

// withMCP sets the configuration's MCP servers.
func withMCP(servers map[string]config.MCPServer) func(*config.Config) {
	return func(c *config.Config) { c.MCPServers = servers }
}

// A step offers a stdio server's tools (mcp:local) and one tool of an
// HTTP server (mcp:web/add); the model calls both by their mcp__ names,
// and its answer uses what they returned. The step keeps each call with
// the tool's own name, the event log's tool.turn names the servers, each
// server ran each call once. On both dialects.
func TestMCPToolsStdioAndHTTP(t *testing.T) {
	dir, webDir := t.TempDir(), t.TempDir()
	web := mcpHTTP(t, webDir)
	e := testenv.Start(t, testenv.Options{
		Scenario: chaosllm.Scenario{ToolScript: []chaosllm.ScriptTurn{
			{Calls: []chaosllm.ScriptCall{call("mcp__local__echo", map[string]any{"text": "north: 1200"}), call("mcp__web__add", map[string]any{"a": 1200, "b": 800})}},
		}},
		Metrics:   true,
		Configure: withMCP(map[string]config.MCPServer{"local": mcpStdio(dir, nil), "web": web})})
	for i, d := range dialects {
		id := e.Submit(t, e.Spec(toolStep(d.route, `["mcp:local", "mcp:web/add"]`, "")))
		wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
		s := wf.Steps[0]
		if wf.State != store.StateCompleted || s.Attempts != 1 {
			t.Fatalf("%s: workflow %s, step %+v", d.route, wf.State, s)
		}
		if want := `final answer using results: north: 1200; {"sum":2000}`; s.Output != want {
			t.Errorf("%s: output %q, want %q", d.route, s.Output, want)
		}
		wantTurns(t, e.Chaos.Snapshot(), d.endpoint, [4]int{1, 2, 2, 0}, [4]int{1, 0, 0, 0})
		recs := records(t, s)
		if len(recs) != 2 || recs[0].Name != "mcp__local__echo" || recs[0].MCP != "mcp:local/echo" || recs[0].Result != "north: 1200" ||
			recs[1].MCP != "mcp:web/add" || recs[1].Result != `{"sum":2000}` {
			t.Errorf("%s: tool_calls %s", d.route, s.ToolCalls)
		}
		turns := eventsOf(t, e, id, s.ID, record.EventToolTurn)
		if len(turns) != 1 || strings.Join(turns[0].Tools, ",") != "mcp:local/echo,mcp:web/add" || turns[0].Error != "" {
			t.Errorf("%s: tool.turn events %+v", d.route, turns)
		}
		if n, m := mcptest.Count(dir, "echo north: 1200"), mcptest.Count(webDir, "add 1200 800"); n != i+1 || m != i+1 {
			t.Errorf("%s: the servers ran echo %d and add %d times, want %d each", d.route, n, m, i+1)
		}
	}
	// the worker's /metrics counts each server's calls by tool and outcome
	body := scrape(t, e.MetricsURL)
	for _, want := range []string{
		`agentq_mcp_calls_total{outcome="ok",server="local",tool="echo"} 2`,
		`agentq_mcp_calls_total{outcome="ok",server="web",tool="add"} 2`,
		`agentq_mcp_server_connections_total{result="started",server="local"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// A tool's own failure (its result's isError) goes back to the model as an
// error result; the step completes. Over stdio and over HTTP.
func TestMCPToolErrorReachesTheModel(t *testing.T) {
	for _, server := range []string{"local", "web"} {
		t.Run(server, func(t *testing.T) {
			e := testenv.Start(t, testenv.Options{
				Scenario: chaosllm.Scenario{ToolScript: []chaosllm.ScriptTurn{{Calls: []chaosllm.ScriptCall{
					call("mcp__"+server+"__fail", map[string]any{"text": "no order 42 in the ledger"})}}}},
				Configure: withMCP(map[string]config.MCPServer{"local": mcpStdio(t.TempDir(), nil), "web": mcpHTTP(t, t.TempDir())})})
			id := e.Submit(t, e.Spec(toolStep("solo", `["mcp:`+server+`/fail"]`, "")))
			wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
			s := wf.Steps[0]
			if want := "final answer using results: error: no order 42 in the ledger"; wf.State != store.StateCompleted || s.Output != want {
				t.Fatalf("workflow %s, output %q, want %q", wf.State, s.Output, want)
			}
			wantTurns(t, e.Chaos.Snapshot(), "openai", [4]int{1, 1, 1, 1}, [4]int{1, 0, 0, 0})
			if recs := records(t, s); len(recs) != 1 || recs[0].Error != "no order 42 in the ledger" {
				t.Errorf("tool_calls %s", s.ToolCalls)
			}
			turns := eventsOf(t, e, id, s.ID, record.EventToolTurn)
			if len(turns) != 1 || turns[0].Error != "mcp:"+server+"/fail: no order 42 in the ledger" {
				t.Errorf("tool.turn events %+v", turns)
			}
		})
	}
}

// Arguments that break an MCP tool's schema (from the server's
// tools/list) are an error result for the model, which may call again;
// the server is never called with them. Over stdio and over HTTP.
func TestMCPArgumentsThatBreakTheSchemaReachTheModelNotTheServer(t *testing.T) {
	for _, server := range []string{"local", "web"} {
		t.Run(server, func(t *testing.T) {
			dir := t.TempDir()
			e := testenv.Start(t, testenv.Options{
				Scenario: chaosllm.Scenario{ToolScript: []chaosllm.ScriptTurn{{Calls: []chaosllm.ScriptCall{
					call("mcp__"+server+"__add", map[string]any{"a": "twelve", "b": 8})}}}},
				Configure: withMCP(map[string]config.MCPServer{"local": mcpStdio(dir, nil), "web": mcpHTTP(t, dir)})})
			id := e.Submit(t, e.Spec(toolStep("solo", `["mcp:`+server+`/add"]`, "")))
			wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
			s := wf.Steps[0]
			if wf.State != store.StateCompleted {
				t.Fatalf("workflow %s, step %+v", wf.State, s)
			}
			recs := records(t, s)
			if len(recs) != 1 || !strings.Contains(recs[0].Error, "the arguments of mcp__"+server+"__add do not match its schema") {
				t.Errorf("tool_calls %s: want the schema's error for the model", s.ToolCalls)
			}
			if calls := mcptest.Calls(dir); len(calls) != 0 {
				t.Errorf("the server was called: %v", calls)
			}
		})
	}
}

// A stdio server that dies during a call: the attempt fails as network
// (retried), the server is started again and the retried step completes;
// the model's turn is not asked again (the answer is kept).
func TestMCPServerKilledMidRunIsRestarted(t *testing.T) {
	dir := t.TempDir()
	e := testenv.Start(t, testenv.Options{
		Scenario: chaosllm.Scenario{ToolScript: []chaosllm.ScriptTurn{{Calls: []chaosllm.ScriptCall{
			call("mcp__local__crash", map[string]any{"key": "k"})}}}},
		Configure: withMCP(map[string]config.MCPServer{"local": mcpStdio(dir, nil)})})
	id := e.Submit(t, e.Spec(toolStep("solo", `["mcp:local"]`, "")))
	wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
	s := wf.Steps[0]
	if wf.State != store.StateCompleted || s.Attempts != 2 || s.Output != "final answer using results: survived k" {
		t.Fatalf("workflow %s, step %+v", wf.State, s)
	}
	if n := mcptest.Count(dir, "crash k"); n != 2 {
		t.Errorf("crash ran %d times, want 2 (once in the server that died, once after)", n)
	}
	wantTurns(t, e.Chaos.Snapshot(), "openai", [4]int{1, 1, 1, 0}, [4]int{1, 0, 0, 0})
	fails := eventsOf(t, e, id, s.ID, record.EventFailed)
	if len(fails) != 1 || fails[0].Class != string(retry.Network) || !strings.Contains(fails[0].Reason, "MCP server local is unreachable") {
		t.Errorf("step.failed events %+v", fails)
	}
}

// A tool marked side_effects whose server dies during the call: its
// outcome is unknown, so the step is dead-lettered (class handler) at
// once for review instead of running it again; requeued, it runs again.
func TestMCPSideEffectWithUnknownOutcomeIsHeld(t *testing.T) {
	dir := t.TempDir()
	local := mcpStdio(dir, nil)
	local.SideEffects = config.MCPSideEffects{Tools: []string{"crash"}}
	e := testenv.Start(t, testenv.Options{
		Scenario: chaosllm.Scenario{ToolScript: []chaosllm.ScriptTurn{{Calls: []chaosllm.ScriptCall{
			call("mcp__local__crash", map[string]any{"key": "order-7"})}}}},
		Configure: withMCP(map[string]config.MCPServer{"local": local})})
	id := e.Submit(t, e.Spec(toolStep("solo", `["mcp:local"]`, "")))
	wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
	s := wf.Steps[0]
	if wf.State != store.StateBlocked || s.State != store.StepDead || s.Attempts != 1 {
		t.Fatalf("workflow %s, step %+v", wf.State, s)
	}
	if want := "handler: tool mcp:local/crash (turn 1, call "; !strings.HasPrefix(s.Error, want) ||
		!strings.Contains(s.Error, "has side effects and its outcome is unknown: MCP server local is unreachable") ||
		!strings.Contains(s.Error, "requeue the step to run it again") {
		t.Errorf("reason %q", s.Error)
	}
	waitDeadLetterCount(t, e, retry.Handler, 1)
	dls, err := e.Client.DeadLetters(t.Context(), string(retry.Handler))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Requeue(t.Context(), dls[0].TaskID); err != nil {
		t.Fatal(err)
	}
	wf = e.Wait(t, id, 30*time.Second, store.StateCompleted)
	if s := wf.Steps[0]; s.Output != "final answer using results: survived order-7" {
		t.Errorf("after the requeue: %+v", s)
	}
	if n := mcptest.Count(dir, "crash order-7"); n != 2 {
		t.Errorf("crash ran %d times, want 2 (held, then requeued)", n)
	}
}

// A result over limits.max_output_bytes goes back to the model as an
// error result naming the limit; the step completes.
func TestMCPResultOverTheLimit(t *testing.T) {
	e := testenv.Start(t, testenv.Options{
		Scenario: chaosllm.Scenario{ToolScript: []chaosllm.ScriptTurn{{Calls: []chaosllm.ScriptCall{
			call("mcp__local__big", map[string]any{"n": 5000})}}}},
		Configure: func(c *config.Config) {
			c.Limits.MaxOutputBytes = 4096
			withMCP(map[string]config.MCPServer{"local": mcpStdio(t.TempDir(), nil)})(c)
		}})
	wf := e.Wait(t, e.Submit(t, e.Spec(toolStep("solo", `["mcp:local/big"]`, ""))), 30*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
	if want := "final answer using results: error: the result of mcp__local__big is 5000 bytes, over the 4096-byte limit (limits.max_output_bytes)"; wf.State != store.StateCompleted || wf.Steps[0].Output != want {
		t.Fatalf("workflow %s, output %q", wf.State, wf.Steps[0].Output)
	}
}

// A step naming a tool its server does not list is dead-lettered as
// bad_request, naming the tools it lists; a server not configured on
// this worker hands the step back (not_served) until one that has it
// takes it.
func TestMCPToolNotListed(t *testing.T) {
	e := testenv.Start(t, testenv.Options{
		Configure: withMCP(map[string]config.MCPServer{"local": mcpStdio(t.TempDir(), nil)})})
	wf := e.Wait(t, e.Submit(t, e.Spec(toolStep("solo", `["mcp:local/nope"]`, ""))), 30*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
	s := wf.Steps[0]
	if wf.State != store.StateBlocked || !strings.HasPrefix(s.Error, `bad_request: tool mcp:local/nope: the server lists no tool "nope" (it lists add, big, change, crash, echo,`) {
		t.Fatalf("workflow %s, step %+v", wf.State, s)
	}
}
