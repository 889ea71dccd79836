package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// result says what the docs say: --json gives a JSON step's parsed value
// beside its text as json (a format: json answer, a code step's value)
// and a step's tool calls as a JSON array, not a string holding one; --all
// prints a map's instance outputs in item order.
func TestResultSaysWhatTheDocsSay(t *testing.T) {
	e := testenv.Start(t, testenv.Options{
		Scenario: chaosllm.Scenario{
			Answers: []chaosllm.Answer{{Match: "^Plan", Items: 3, Field: "cities"}},
			ToolScript: []chaosllm.ScriptTurn{{Calls: []chaosllm.ScriptCall{
				{Name: "fetch_figure", Arguments: map[string]any{"region": "north"}}}}}},
		Steps: map[string]engine.StepFunc{"shout": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			var city string
			if err := s.Item(&city); err != nil {
				return nil, err
			}
			return map[string]any{"city": strings.ToUpper(city), "n": s.Index()}, nil
		}},
		Tools: map[string]engine.Tool{"fetch_figure": {Schema: json.RawMessage(`{"type":"object"}`),
			Func: func(ctx context.Context, args json.RawMessage) (any, error) { return "1200", nil }}}})
	id := e.Submit(t, e.Spec(`name: results
steps:
  - id: plan
    route: solo
    prompt: "Plan a trip"
    output: { format: json, schema: { type: object, properties: { cities: { type: array, items: { type: string } } } } }
  - { id: visit, for_each: "{{ .Steps.plan.JSON.cities }}", run: shout, depends_on: [plan] }
  - { id: ask, route: solo, prompt: "Which region?", tools: [fetch_figure] }
`))
	e.Wait(t, id, 20*time.Second, store.StateCompleted)
	vars, cfg := envFor(t, e)

	r := run(t, cli.Enqueue, vars, "result", id, "--json", "--config", cfg)
	if r.code != 0 {
		t.Fatalf("result --json: exit %d %s", r.code, r.err)
	}
	var got struct {
		Steps []struct {
			ID        string           `json:"id"`
			JSON      map[string]any   `json:"json"`
			ToolCalls []map[string]any `json:"tool_calls"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(r.out), &got); err != nil {
		t.Fatalf("result --json is not the documented shape (%v):\n%s", err, r.out)
	}
	if cities, _ := got.Steps[0].JSON["cities"].([]any); len(cities) != 3 || cities[0] != "cities 1" {
		t.Errorf("plan's json %v, want its parsed answer", got.Steps[0].JSON)
	}
	if len(got.Steps[2].ToolCalls) == 0 {
		t.Errorf("ask's tool_calls %v, want a JSON array of the calls", got.Steps[2].ToolCalls)
	}

	r = run(t, cli.Enqueue, vars, "result", id, "--all", "--config", cfg)
	for _, want := range []string{"== visit ==\n[0] {\"city\":\"CITIES 1\",\"n\":0}\n[1] {\"city\":\"CITIES 2\",\"n\":1}\n[2] {\"city\":\"CITIES 3\",\"n\":2}\n"} {
		if r.code != 0 || !strings.Contains(r.out, want) {
			t.Fatalf("result --all (exit %d) lacks the map's outputs %q:\n%s", r.code, want, r.out)
		}
	}
}
