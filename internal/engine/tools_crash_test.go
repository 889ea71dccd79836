package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// childTools are the tools of a worker process started with _TOOLS: as
// the test's own, except that fetch_figure for east never returns (the
// process is killed while it runs).
func childTools() map[string]engine.Tool {
	fetch := figureTool("worker process", nil)
	inner := fetch.Func
	fetch.Func = func(ctx context.Context, args json.RawMessage) (any, error) {
		var a struct{ Region string }
		if json.Unmarshal(args, &a) == nil && a.Region == "east" {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return inner(ctx, args)
	}
	return map[string]engine.Tool{"fetch_figure": fetch}
}

// SIGKILL a worker process in the middle of a tool conversation (turn 2's
// tool is running; turn 1's answer and results and turn 2's answer are
// kept): after a restart the step resumes at turn 2. The provider is asked
// each turn once, turn 1's tools are not run again (their results in the
// answer are the killed process's), and only turn 2's tool runs here. On
// both dialects at once.
func TestToolLoopResumesAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("waits about a minute for asynq to recover the killed worker's tasks")
	}
	t.Parallel()
	runs := &toolRuns{}
	e := testenv.Start(t, testenv.Options{NoWorker: true,
		Scenario: chaosllm.Scenario{ToolScript: []chaosllm.ScriptTurn{
			{Calls: []chaosllm.ScriptCall{call("fetch_figure", map[string]any{"region": "north"}), call("fetch_figure", map[string]any{"region": "south"})}},
			{Calls: []chaosllm.ScriptCall{call("fetch_figure", map[string]any{"region": "east"})}},
		}},
		Tools: map[string]engine.Tool{"fetch_figure": figureTool("test worker", runs)}})
	p := startWorkerProcess(t, e, 2, workerEnv+"_TOOLS=1")
	var ids []string
	for _, d := range dialects {
		ids = append(ids, e.Submit(t, e.Spec(toolStep(d.route, "[fetch_figure]", ""))))
	}
	// four durable calls: turn 1's answer, its two results, turn 2's answer
	for _, id := range ids {
		poll.Until(t, 20*time.Second, func() (bool, string) {
			calls, err := e.Store.Calls(t.Context(), id, "ask")
			if err != nil {
				t.Fatal(err)
			}
			return len(calls) == 4, fmt.Sprintf("workflow %s: %d durable calls kept, want 4 (turn 2's tool running)", id, len(calls))
		})
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	killed := time.Now()
	for _, id := range ids {
		if wf, _ := e.Store.Get(context.Background(), id); wf.Steps[0].State != store.StepRunning {
			t.Fatalf("after the kill: %+v (want the step running)", wf.Steps[0])
		}
	}
	e.StartWorker(t)
	for i, d := range dialects {
		wf := e.Wait(t, ids[i], 150*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
		s := wf.Steps[0]
		t.Logf("%s: the step resumed and completed %.1fs after the SIGKILL", d.route, time.Since(killed).Seconds())
		if wf.State != store.StateCompleted || s.Attempts != 2 {
			t.Fatalf("%s: workflow %s, step %+v", d.route, wf.State, s)
		}
		want := "final answer using results: north: 1200 (worker process); south: 800 (worker process); east: 500 (test worker)"
		if s.Output != want {
			t.Errorf("%s: output %q, want %q", d.route, s.Output, want)
		}
		wantTurns(t, e.Chaos.Snapshot(), d.endpoint, [4]int{1, 2, 2, 0}, [4]int{1, 1, 1, 0}, [4]int{1, 0, 0, 0})
		if recs := records(t, s); len(recs) != 3 || recs[0].Result != "north: 1200 (worker process)" || recs[2].Result != "east: 500 (test worker)" {
			t.Errorf("%s: tool_calls %s", d.route, s.ToolCalls)
		}
	}
	if n, north := runs.get("east"), runs.get("north")+runs.get("south"); n != 2 || north != 0 {
		t.Errorf("after the restart east ran %d times (want once a workflow) and turn 1's tools %d (want 0)", n, north)
	}
}
