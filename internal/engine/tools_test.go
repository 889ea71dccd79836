package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// dialects are the routes tool tests run on: OpenAI only, Anthropic only.
var dialects = []struct{ route, endpoint string }{{"solo", "openai"}, {"limited", "anthropic"}}

// figures are what fetch_figure answers, by region.
var figures = map[string]int{"north": 1200, "south": 800, "east": 500}

var figureSchema = json.RawMessage(`{"type": "object", "description": "A region's sales figure",
	"required": ["region"], "additionalProperties": false, "properties": {"region": {"type": "string"}}}`)

// toolRuns counts a test's tool executions by name and argument.
type toolRuns struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *toolRuns) add(k string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[k]++
}

func (r *toolRuns) get(k string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[k]
}

// figureTool answers "<region>: <figure> (<who>)".
func figureTool(who string, runs *toolRuns) engine.Tool {
	return engine.Tool{Schema: figureSchema, Func: func(ctx context.Context, args json.RawMessage) (any, error) {
		var a struct{ Region string }
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, err
		}
		if runs != nil {
			runs.add(a.Region)
		}
		return fmt.Sprintf("%s: %d (%s)", a.Region, figures[a.Region], who), nil
	}}
}

// toolStep is a one-step spec on route offering tools; extra is more of
// the step's fields.
func toolStep(route, tools, extra string) string {
	return "name: tools\nsteps:\n  - id: ask\n    route: " + route + "\n    timeout: 20s\n    max_retries: 1\n" +
		"    prompt: \"Which region sold the most?\"\n    tools: " + tools + "\n" + extra
}

func call(name string, args map[string]any) chaosllm.ScriptCall {
	return chaosllm.ScriptCall{Name: name, Arguments: args}
}

// records reads a step's tool_calls.
func records(t *testing.T, s store.StepRecord) []engine.ToolCallRecord {
	t.Helper()
	var out []engine.ToolCallRecord
	if err := json.Unmarshal([]byte(s.ToolCalls), &out); err != nil {
		t.Fatalf("tool_calls %q: %v", s.ToolCalls, err)
	}
	return out
}

// wantTurns compares chaosllm's count of each turn on endpoint with want:
// answers, the calls they made, and the results (error results) that came
// back for those calls; and checks that no turn after them was asked.
func wantTurns(t *testing.T, st chaosllm.Stats, endpoint string, want ...[4]int) {
	t.Helper()
	for i, w := range want {
		g := st.ToolTurn(endpoint, i+1)
		if got := [4]int{g.Answers, g.Calls, g.Results, g.ErrorResults}; got != w {
			t.Errorf("%s turn %d: answers, calls, results, error results %v, want %v", endpoint, i+1, got, w)
		}
	}
	if n := st.ToolTurn(endpoint, len(want)+1).Answers; n != 0 {
		t.Errorf("%s turn %d was asked %d times, want never", endpoint, len(want)+1, n)
	}
}

// Three turns: two figures, then their sum, then the answer, which names
// every result (so each was fed back); every provider turn and every tool
// ran once, and the step keeps each call with its result.
func TestToolLoopFeedsEveryResultBack(t *testing.T) {
	runs := &toolRuns{}
	e := testenv.Start(t, testenv.Options{
		Scenario: chaosllm.Scenario{ToolScript: []chaosllm.ScriptTurn{
			{Calls: []chaosllm.ScriptCall{call("fetch_figure", map[string]any{"region": "north"}), call("fetch_figure", map[string]any{"region": "south"})}},
			{Text: "Adding them.", Calls: []chaosllm.ScriptCall{call("add", map[string]any{"a": 1200, "b": 800})}},
		}},
		Tools: map[string]engine.Tool{
			"fetch_figure": figureTool("test worker", runs),
			"add": {Schema: json.RawMessage(`{"type":"object","required":["a","b"],"properties":{"a":{"type":"number"},"b":{"type":"number"}}}`),
				Func: func(ctx context.Context, args json.RawMessage) (any, error) {
					var a struct{ A, B float64 }
					if err := json.Unmarshal(args, &a); err != nil {
						return nil, err
					}
					runs.add("add")
					return map[string]float64{"sum": a.A + a.B}, nil
				}},
		}})
	for i, d := range dialects {
		id := e.Submit(t, e.Spec(toolStep(d.route, "[fetch_figure, add]", "")))
		wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
		s := wf.Steps[0]
		if wf.State != store.StateCompleted || s.Attempts != 1 {
			t.Fatalf("%s: workflow %s, step %+v", d.route, wf.State, s)
		}
		if want := `final answer using results: north: 1200 (test worker); south: 800 (test worker); {"sum":2000}`; s.Output != want {
			t.Errorf("%s: output %q, want %q", d.route, s.Output, want)
		}
		wantTurns(t, e.Chaos.Snapshot(), d.endpoint, [4]int{1, 2, 2, 0}, [4]int{1, 1, 1, 0}, [4]int{1, 0, 0, 0})
		if n := runs.get("north") + runs.get("south") + runs.get("add"); n != 3*(i+1) {
			t.Errorf("%s: tools ran %d times in all, want %d", d.route, n, 3*(i+1))
		}
		recs := records(t, s)
		if len(recs) != 3 || recs[0].Turn != 1 || recs[0].Name != "fetch_figure" || recs[0].Arguments != `{"region":"north"}` ||
			recs[1].Result != "south: 800 (test worker)" || recs[2].Turn != 2 || recs[2].Result != `{"sum":2000}` || recs[2].Error != "" {
			t.Errorf("%s: tool_calls %s", d.route, s.ToolCalls)
		}
		if s.Usage.PromptTokens == 0 || !strings.HasSuffix(s.Target, "/m-solo") && !strings.HasSuffix(s.Target, "/m-capped") {
			t.Errorf("%s: target %q, usage %+v", d.route, s.Target, s.Usage)
		}
	}
}

// The two calls of one turn run at once: each waits until the other has
// started, so run one after the other the first would never return.
func TestToolCallsOfOneTurnOverlap(t *testing.T) {
	var mu sync.Mutex
	var started map[string]chan struct{}
	reset := func() {
		mu.Lock()
		defer mu.Unlock()
		started = map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	}
	reset()
	meet := func(ctx context.Context, args json.RawMessage) (any, error) {
		var a struct{ Side string }
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, err
		}
		other := map[string]string{"a": "b", "b": "a"}[a.Side]
		mu.Lock()
		mine, theirs := started[a.Side], started[other]
		mu.Unlock()
		close(mine)
		select {
		case <-theirs:
			return "met " + other, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Second): // a bound, not a synchronisation
			return nil, errors.New("the other call never started: the calls ran one after the other")
		}
	}
	e := testenv.Start(t, testenv.Options{
		Scenario: chaosllm.Scenario{ToolScript: []chaosllm.ScriptTurn{{Calls: []chaosllm.ScriptCall{
			call("meet", map[string]any{"side": "a"}), call("meet", map[string]any{"side": "b"})}}}},
		Tools: map[string]engine.Tool{"meet": {Func: meet,
			Schema: json.RawMessage(`{"type":"object","required":["side"],"properties":{"side":{"enum":["a","b"]}}}`)}}})
	for _, d := range dialects {
		reset()
		id := e.Submit(t, e.Spec(toolStep(d.route, "[meet]", "")))
		wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
		if want := "final answer using results: met b; met a"; wf.State != store.StateCompleted || wf.Steps[0].Output != want {
			t.Fatalf("%s: workflow %s, output %q, want %q", d.route, wf.State, wf.Steps[0].Output, want)
		}
	}
}

// A call to a tool the step does not run, arguments that break the
// schema, a tool's error and a tool's panic each go back to the model as
// an error result; the step completes and the worker goes on.
func TestToolCallErrorsGoBackToTheModel(t *testing.T) {
	runs := &toolRuns{}
	e := testenv.Start(t, testenv.Options{
		Scenario: chaosllm.Scenario{ToolScript: []chaosllm.ScriptTurn{{Calls: []chaosllm.ScriptCall{
			call("fetch_figure", map[string]any{"region": "north"}),
			call("delete_everything", nil),
			call("fetch_figure", map[string]any{"region": 7}),
			call("warehouse", nil),
			call("boom", nil),
		}}}},
		Tools: map[string]engine.Tool{
			"fetch_figure": figureTool("test worker", runs),
			"warehouse": {Schema: json.RawMessage(`{"type":"object"}`), Func: func(ctx context.Context, args json.RawMessage) (any, error) {
				return nil, errors.New("warehouse offline")
			}},
			"boom": {Schema: json.RawMessage(`{"type":"object"}`), Func: func(ctx context.Context, args json.RawMessage) (any, error) {
				var items []int
				return items[len(args)], nil // a real runtime panic: index out of range
			}},
			"delete_everything": {Schema: json.RawMessage(`{"type":"object"}`), Func: func(ctx context.Context, args json.RawMessage) (any, error) {
				runs.add("delete_everything")
				return "deleted", nil
			}},
		}})
	for i, d := range dialects {
		id := e.Submit(t, e.Spec(toolStep(d.route, "[fetch_figure, warehouse, boom]", "")))
		wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
		s := wf.Steps[0]
		if wf.State != store.StateCompleted || s.Attempts != 1 {
			t.Fatalf("%s: workflow %s, step %+v", d.route, wf.State, s)
		}
		want := []string{"final answer using results: north: 1200 (test worker); ",
			`error: no tool named "delete_everything" is run for this step (it can call fetch_figure, warehouse, boom); `,
			"error: the arguments of fetch_figure do not match its schema: ", "; error: warehouse offline; ",
			"error: the tool boom panicked: runtime error: index out of range"}
		rest := s.Output
		for _, w := range want {
			j := strings.Index(rest, w)
			if j < 0 {
				t.Fatalf("%s: output %q lacks %q (in order)", d.route, s.Output, w)
			}
			rest = rest[j+len(w):]
		}
		wantTurns(t, e.Chaos.Snapshot(), d.endpoint, [4]int{1, 5, 5, 4}, [4]int{1, 0, 0, 0})
		if runs.get("north") != i+1 || runs.get("delete_everything") != 0 {
			t.Errorf("%s: runs %v: the invalid call and the tool the step does not offer must not run", d.route, runs.n)
		}
		recs := records(t, s)
		if len(recs) != 5 || recs[0].Error != "" || recs[1].Error == "" || recs[2].Error == "" || recs[3].Error != "warehouse offline" || recs[4].Result != "" {
			t.Errorf("%s: tool_calls %s", d.route, s.ToolCalls)
		}
		// the log has the turn: its tools, and the first that answered with an error
		turns := eventsOf(t, e, id, s.ID, record.EventToolTurn)
		if len(turns) != 1 || strings.Join(turns[0].Tools, ",") != "fetch_figure,delete_everything,fetch_figure,warehouse,boom" ||
			!strings.HasPrefix(turns[0].Error, "delete_everything: ") {
			t.Errorf("%s: tool.turn events %+v", d.route, turns)
		}
		if calls := eventsOf(t, e, id, s.ID, record.EventLLMCall); len(calls) != 2 {
			t.Errorf("%s: %d llm.call events for a conversation of two turns", d.route, len(calls))
		}
	}
}
