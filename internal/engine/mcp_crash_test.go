package engine_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/mcptool/mcptest"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/retry"
)

// mcpCrashServers are the MCP servers of the SIGKILL test, logging in dir:
// local, fx, whose wait has side effects (both over stdio), and web, the
// test's server over HTTP at webURL.
func mcpCrashServers(dir, webURL string) map[string]config.MCPServer {
	fx := mcpStdio(dir, nil)
	fx.SideEffects = config.MCPSideEffects{Tools: []string{"wait"}}
	return map[string]config.MCPServer{"local": mcpStdio(dir, nil), "fx": fx,
		"web": {URL: webURL, Timeout: config.Duration(10 * time.Second), Concurrency: 4}}
}

// childMCPServers are a worker process's MCP servers: the SIGKILL test's,
// when it gives their directory and the HTTP server's URL (_MCP_DIR,
// _MCP_WEB).
func childMCPServers() map[string]config.MCPServer {
	dir := os.Getenv(workerEnv + "_MCP_DIR")
	if dir == "" {
		return nil
	}
	return mcpCrashServers(dir, os.Getenv(workerEnv+"_MCP_WEB"))
}

// SIGKILL a worker process while MCP tools run: workflow a's echoes, over
// stdio and over HTTP, have returned (their results kept) and its wait
// runs; workflow b's wait, a tool with side effects, runs (its mark kept).
// After a restart a resumes: neither echo is run again, wait is (it has no
// side effects), and the provider is asked each turn once; b is
// dead-lettered (class handler) for review, its wait not run again.
func TestMCPToolTurnsAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("waits about a minute for asynq to recover the killed worker's tasks")
	}
	t.Parallel()
	dir, webDir := t.TempDir(), t.TempDir()
	web := mcpHTTP(t, webDir)
	e := testenv.Start(t, testenv.Options{NoWorker: true,
		Scenario: chaosllm.Scenario{ToolScript: []chaosllm.ScriptTurn{{Calls: []chaosllm.ScriptCall{
			call("mcp__local__echo", map[string]any{"text": "kept"}),
			call("mcp__web__echo", map[string]any{"text": "kept on the web"}),
			call("mcp__local__wait", map[string]any{"key": "a"}),
			call("mcp__fx__wait", map[string]any{"key": "b"}),
		}}}},
		Configure: withMCP(mcpCrashServers(dir, web.URL))})
	p := startWorkerProcess(t, e, 2, workerEnv+"_MCP_DIR="+dir, workerEnv+"_MCP_WEB="+web.URL)
	a := e.Submit(t, e.Spec(toolStep("solo", `["mcp:local", "mcp:web"]`, "")))
	b := e.Submit(t, e.Spec(toolStep("solo", `["mcp:fx"]`, "")))
	// a: turn 1's answer, the echoes' results, fx's call refused (a does
	// not offer it); b: the answer, three refused calls, its wait's mark
	for id, n := range map[string]int{a: 4, b: 5} {
		poll.Until(t, 20*time.Second, func() (bool, string) {
			calls, err := e.Store.Calls(t.Context(), id, "ask")
			if err != nil {
				t.Fatal(err)
			}
			return len(calls) == n, fmt.Sprintf("workflow %s: %d durable calls kept, want %d", id, len(calls), n)
		})
	}
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return mcptest.Count(dir, "wait a") == 1 && mcptest.Count(dir, "wait b") == 1, fmt.Sprintf("the waits have not both begun: %v", mcptest.Calls(dir))
	})
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	killed := time.Now()
	for _, key := range []string{"a", "b"} { // a wait that runs again returns at once
		if err := os.WriteFile(filepath.Join(dir, "release-"+key), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.StartWorker(t)
	wf := e.Wait(t, a, 150*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
	t.Logf("a resumed and completed %.1fs after the SIGKILL", time.Since(killed).Seconds())
	s := wf.Steps[0]
	if want := `final answer using results: kept; kept on the web; released a; error: no tool named "mcp__fx__wait" is run for this step (it can call `; wf.State != store.StateCompleted || s.Attempts != 2 || !strings.HasPrefix(s.Output, want) {
		t.Errorf("a: workflow %s, step %+v", wf.State, s)
	}
	wf = e.Wait(t, b, 150*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
	s = wf.Steps[0]
	if wf.State != store.StateBlocked || s.State != store.StepDead ||
		!strings.Contains(s.Error, "tool mcp:fx/wait (turn 1, call ") || !strings.Contains(s.Error, "attempt 1 began it and ended before its outcome was kept") {
		t.Errorf("b: workflow %s, step %+v", wf.State, s)
	}
	waitDeadLetterCount(t, e, retry.Handler, 1)
	if echo, webEcho, waitA, waitB := mcptest.Count(dir, "echo kept"), mcptest.Count(webDir, "echo kept on the web"), mcptest.Count(dir, "wait a"), mcptest.Count(dir, "wait b"); echo != 1 || webEcho != 1 || waitA != 2 || waitB != 1 {
		t.Errorf("after the restart: echo ran %d times (want 1), the web's echo %d (want 1), a's wait %d (want 2), b's wait %d (want 1)", echo, webEcho, waitA, waitB)
	}
	// turn 1 asked once for each; turn 2 once, for a alone, with its four
	// results (one an error: a does not offer fx)
	wantTurns(t, e.Chaos.Snapshot(), "openai", [4]int{2, 8, 4, 1}, [4]int{1, 0, 0, 0})
}
