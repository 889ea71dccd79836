package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/retry"
)

// A FatalToolError ends the conversation: the step is dead-lettered at
// once (no retry, though it has one) with the tool's error, and the model
// is not asked again.
func TestFatalToolErrorDeadLettersTheStep(t *testing.T) {
	runs := &toolRuns{}
	e := testenv.Start(t, testenv.Options{
		Scenario: chaosllm.Scenario{ToolScript: []chaosllm.ScriptTurn{{Calls: []chaosllm.ScriptCall{
			call("fetch_figure", map[string]any{"region": "north"}), call("vault", nil)}}}},
		Tools: map[string]engine.Tool{
			"fetch_figure": figureTool("test worker", runs),
			"vault": {Schema: json.RawMessage(`{"type":"object"}`), Func: func(ctx context.Context, args json.RawMessage) (any, error) {
				runs.add("vault")
				return nil, engine.FatalToolError(errors.New("the warehouse credentials were revoked"))
			}},
		}})
	for i, d := range dialects {
		id := e.Submit(t, e.Spec(toolStep(d.route, "[fetch_figure, vault]", "")))
		wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
		s := wf.Steps[0]
		if wf.State != store.StateBlocked || s.State != store.StepDead || s.Attempts != 1 {
			t.Fatalf("%s: workflow %s, step %+v", d.route, wf.State, s)
		}
		if want := "handler: tool vault (turn 1, call "; !strings.HasPrefix(s.Error, want) || !strings.HasSuffix(s.Error, ") failed: the warehouse credentials were revoked") {
			t.Errorf("%s: reason %q", d.route, s.Error)
		}
		wantTurns(t, e.Chaos.Snapshot(), d.endpoint, [4]int{1, 2, 0, 0})
		if runs.get("vault") != i+1 {
			t.Errorf("%s: the tool ran %d times, want once per workflow", d.route, runs.get("vault"))
		}
	}
	waitDeadLetterCount(t, e, retry.Handler, 2)
}

// A model that still calls tools at the step's last turn dead-letters the
// step as bad_request; the calls of that turn are not run and no further
// turn is asked.
func TestMaxTurnsExceededDeadLetters(t *testing.T) {
	runs := &toolRuns{}
	turn := func(region string) chaosllm.ScriptTurn {
		return chaosllm.ScriptTurn{Calls: []chaosllm.ScriptCall{call("fetch_figure", map[string]any{"region": region})}}
	}
	e := testenv.Start(t, testenv.Options{
		Scenario: chaosllm.Scenario{ToolScript: []chaosllm.ScriptTurn{turn("north"), turn("south"), turn("east")}},
		Tools:    map[string]engine.Tool{"fetch_figure": figureTool("test worker", runs)}})
	for i, d := range dialects {
		id := e.Submit(t, e.Spec(toolStep(d.route, "[fetch_figure]", "    max_turns: 2\n")))
		wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
		s := wf.Steps[0]
		if wf.State != store.StateBlocked || s.State != store.StepDead || s.Attempts != 1 {
			t.Fatalf("%s: workflow %s, step %+v", d.route, wf.State, s)
		}
		if want := "bad_request: the model was still calling tools after 2 turns (the step's max_turns)"; s.Error != want {
			t.Errorf("%s: reason %q, want %q", d.route, s.Error, want)
		}
		wantTurns(t, e.Chaos.Snapshot(), d.endpoint, [4]int{1, 1, 1, 0}, [4]int{1, 1, 0, 0})
		if runs.get("north") != i+1 || runs.get("south") != 0 {
			t.Errorf("%s: runs %v: the last turn's call must not run", d.route, runs.n)
		}
	}
	waitDeadLetterCount(t, e, retry.BadRequest, 2)
}

// A tool that does not heed its context does not hold the step past its
// timeout: the attempt ends as a timeout while the tool still runs (and
// with no retry left the step is dead-lettered with that reason).
func TestToolThatIgnoresItsContextDoesNotHoldTheStep(t *testing.T) {
	release := make(chan struct{})
	e := testenv.Start(t, testenv.Options{
		Scenario: chaosllm.Scenario{ToolScript: []chaosllm.ScriptTurn{{Calls: []chaosllm.ScriptCall{call("stuck", nil)}}}},
		Tools: map[string]engine.Tool{"stuck": {Schema: json.RawMessage(`{"type":"object"}`),
			Func: func(ctx context.Context, args json.RawMessage) (any, error) { <-release; return "late", nil }}}})
	t.Cleanup(func() { close(release) }) // before the worker stops (cleanups run last first)
	src := strings.NewReplacer("timeout: 20s", "timeout: 2s", "max_retries: 1", "max_retries: 0").Replace(toolStep("solo", "[stuck]", ""))
	started := time.Now()
	wf := e.Wait(t, e.Submit(t, e.Spec(src)), 20*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
	s := wf.Steps[0]
	if wf.State != store.StateBlocked || !strings.HasPrefix(s.Error, "timeout: ") || !strings.Contains(s.Error, "context deadline exceeded") {
		t.Fatalf("workflow %s, step %+v", wf.State, s)
	}
	if took := time.Since(started); took > 5*time.Second {
		t.Errorf("the step ended %s after it was submitted, its timeout is 2s", took)
	}
}

// waitDeadLetterCount waits until there are n dead letters of class (the
// task is archived just after its step settles).
func waitDeadLetterCount(t *testing.T, e *testenv.Env, class retry.Class, n int) {
	t.Helper()
	poll.Until(t, 10*time.Second, func() (bool, string) {
		dls, err := e.Client.DeadLetters(t.Context(), string(class))
		if err != nil {
			t.Fatal(err)
		}
		return len(dls) == n, fmt.Sprintf("%d dead letters of class %s, want %d", len(dls), class, n)
	})
}
