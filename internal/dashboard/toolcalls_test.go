package dashboard_test

import (
	"context"
	"encoding/json"
	"html"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// A step that ran tools shows each call with its result on the workflow
// page, and the API gives them as the step's tool_calls.
func TestStepShowsItsToolCalls(t *testing.T) {
	e := testenv.Start(t, testenv.Options{
		Scenario: chaosllm.Scenario{ToolScript: []chaosllm.ScriptTurn{{Calls: []chaosllm.ScriptCall{
			{Name: "fetch_figure", Arguments: map[string]any{"region": "north"}}}}}},
		Tools: map[string]engine.Tool{"fetch_figure": {Schema: json.RawMessage(`{"type":"object"}`),
			Func: func(ctx context.Context, args json.RawMessage) (any, error) { return "north sold <1200>", nil }}}})
	id := e.Submit(t, e.Spec("name: tools\nsteps:\n  - { id: ask, route: solo, prompt: \"Which region?\", tools: [fetch_figure] }\n"))
	wf := e.Wait(t, id, 20*time.Second, store.StateCompleted, store.StateBlocked)
	if wf.State != store.StateCompleted || wf.Steps[0].ToolCalls == "" {
		t.Fatalf("workflow %s, step %+v", wf.State, wf.Steps[0])
	}
	d := serveDash(t, e, dashboard.Options{Token: token})
	page := d.do(t, call{Path: "/workflows/" + id, Bearer: token})
	want := `<details class="tool-calls"><summary>tool calls</summary><pre>` + html.EscapeString(string(wf.Steps[0].ToolCalls)) + `</pre></details>`
	if page.Code != 200 || !strings.Contains(page.Body, want) {
		t.Fatalf("workflow page (%d) does not show the tool calls %s:\n%s", page.Code, want, page.Body)
	}
	api := d.do(t, call{Path: "/api/v1/workflows/" + id, Bearer: token})
	// the tool calls are a JSON array in the answer, not a string holding one
	var got struct {
		Steps []struct {
			ToolCalls []map[string]any `json:"tool_calls"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(api.Body), &got); err != nil || len(got.Steps) != 1 || len(got.Steps[0].ToolCalls) == 0 ||
		got.Steps[0].ToolCalls[0]["result"] != "north sold <1200>" {
		t.Fatalf("API (%d, %v): %s", api.Code, err, api.Body)
	}
}
