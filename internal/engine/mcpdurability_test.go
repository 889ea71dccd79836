package engine_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/mcptool/mcptest"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/retry"
)

// sideEffectUnderDurability starts a worker under redis.durability (one
// replica) whose step's model calls echo(text), a tool with side effects
// of the MCP server logging in dir, and freezes the replica while the
// model's answer (3 s late) is on its way. thaw brings the replica back (and runs at
// the test's end if it has not).
func sideEffectUnderDurability(t *testing.T, text string, logs *testenv.Buffer) (e *testenv.Env, id, dir string, thaw func()) {
	t.Helper()
	primary, replicas := redistest.Replicated(t, 1)
	replica := replicas[0]
	dir = t.TempDir()
	local := mcpStdio(dir, nil)
	local.SideEffects = config.MCPSideEffects{Tools: []string{"echo"}}
	o := testenv.Options{RedisAddr: primary.Addr(),
		Durability: &config.Durability{Replicas: 1, Timeout: config.Duration(time.Second)},
		Scenario: chaosllm.Scenario{
			Phases:     []chaosllm.Phase{{Requests: 1, Latency: chaosllm.Fixed(3 * time.Second)}, {}}, // the replica is frozen meanwhile
			ToolScript: []chaosllm.ScriptTurn{{Calls: []chaosllm.ScriptCall{call("mcp__local__echo", map[string]any{"text": text})}}}},
		Configure: withMCP(map[string]config.MCPServer{"local": local})}
	if logs != nil {
		o.LogTo = logs
	}
	e = testenv.Start(t, o)
	id = e.Submit(t, e.Spec(toolStep("solo", `["mcp:local"]`, "")))
	poll.Until(t, 10*time.Second, func() (bool, string) {
		wf, err := e.Store.Get(t.Context(), id)
		return err == nil && wf.Steps[0].State == store.StepRunning, "the step never started"
	})
	replica.Freeze()
	var once sync.Once
	thaw = func() { once.Do(replica.Thaw) }
	t.Cleanup(thaw)
	return e, id, dir, thaw
}

// completedOnce waits for workflow id to complete with the tool run once.
func completedOnce(t *testing.T, e *testenv.Env, id, dir, call string) {
	t.Helper()
	wf := e.Wait(t, id, 60*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
	if wf.State != store.StateCompleted {
		t.Fatalf("workflow %s, step %+v", wf.State, wf.Steps[0])
	}
	if n := mcptest.Count(dir, call); n != 1 {
		t.Fatalf("the tool ran %d times, want once", n)
	}
}

// Under redis.durability a call to a tool with side effects is made only
// once its mark is confirmed by the replicas (a failover that lost the
// mark would let a retry make the call again): while the only replica is
// away the call waits, not made; once it is back the call is made, once,
// and the step completes. (The log's words "replicas" are scrubbed here:
// the test server's directory, a secret of its env, holds the test's name.)
func TestASideEffectCallWaitsForTheReplicasToConfirmItsMark(t *testing.T) {
	t.Parallel()
	logs := &testenv.Buffer{}
	e, id, dir, thaw := sideEffectUnderDurability(t, "ship order-9", logs)
	poll.Until(t, 20*time.Second, func() (bool, string) {
		return strings.Contains(logs.String(), "the call waits for them"), "the call never waited for its mark:\n" + logs.String()
	})
	if n := mcptest.Count(dir, "echo ship order-9"); n != 0 {
		t.Fatalf("the tool ran %d times before its mark was confirmed", n)
	}
	thaw()
	completedOnce(t, e, id, dir, "echo ship order-9")
	if !strings.Contains(logs.String(), "making the call") {
		t.Error("the log does not say the call went once its mark was confirmed")
	}
}

// A side-effect call whose mark the replicas do not confirm while the step
// is this worker's is not made: the attempt ends unconfirmed (none of the
// step's retries used), the mark is released, and the next attempt, once
// the replica is back, makes the call, once.
func TestASideEffectCallWhoseMarkIsNeverConfirmedIsNotMade(t *testing.T) {
	t.Parallel()
	e, id, dir, thaw := sideEffectUnderDurability(t, "ship order-10", nil)
	deadline := time.After(90 * time.Second)
	for unconfirmed := false; !unconfirmed; {
		select {
		case ev := <-e.Events:
			if ev.Step == "ask" && ev.Class == retry.Unconfirmed && ev.Err != nil && strings.Contains(ev.Err.Error(), "so the call was not made") {
				unconfirmed = true
			} else if ev.Step == "ask" && ev.Class != "" && ev.Class != retry.Unconfirmed {
				t.Fatalf("the attempt ended %s (%v), want unconfirmed", ev.Class, ev.Err)
			}
		case <-deadline:
			t.Fatal("no attempt ended unconfirmed with the replica away")
		}
	}
	if n := mcptest.Count(dir, "echo ship order-10"); n != 0 {
		t.Fatalf("the tool ran %d times while its mark was not confirmed", n)
	}
	thaw()
	completedOnce(t, e, id, dir, "echo ship order-10")
}
