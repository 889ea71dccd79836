package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/spec"
)

// A step's tools as the model is offered them: a registered tool with its
// schema and description, any other as the spec gives it.
func TestToolsRequest(t *testing.T) {
	s, err := spec.ParseSpec("w.yaml", []byte(`name: t
steps:
  - id: a
    route: report
    prompt: hi
    tools:
      - fetch_figure
      - { name: weather, description: Weather now, parameters: { type: object } }
`), routes, spec.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	st, _ := s.Step("a")
	reg := map[string]*compiledTool{"fetch_figure": {name: "fetch_figure", description: "a figure", params: map[string]any{"type": "object"}}}
	if !runsTools(st, reg) || !runsTools(st, nil) {
		t.Error("a step naming a tool runs tools")
	}
	if err := missingTool(st, nil, nil); err == nil || err.Error() != `tool "fetch_figure" is not registered on this worker` {
		t.Errorf("missing: %v", err)
	}
	req := toolsRequest(st, reg)
	if len(req) != 2 || req[0].Description != "a figure" || req[0].Parameters["type"] != "object" || req[1].Description != "Weather now" {
		t.Errorf("offered %+v", req)
	}
}

func TestCheckTool(t *testing.T) {
	fn := func(ctx context.Context, args json.RawMessage) (any, error) { return nil, nil }
	cases := []struct {
		name, schema, want string
		fn                 ToolFunc
	}{
		{"ok", `{"type":"object","description":"d"}`, "", fn},
		{"bad name", `{"type":"object"}`, "a tool name is", fn},
		{"ok", `{"type":"object"}`, "the function is nil", nil},
		{"ok", `[1]`, "not a JSON object", fn},
		{"ok", `{"type":"string"}`, "of type object", fn},
		{"ok", `{"type":"object","properties":{"a":{"$ref":"http://example.invalid/x.json"}}}`, "does not compile", fn},
	}
	for _, c := range cases {
		err := CheckTool(c.name, Tool{Schema: json.RawMessage(c.schema), Func: c.fn})
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n")) {
			t.Errorf("%s %s: %v, want %q", c.name, c.schema, err, c.want)
		}
	}
	c, err := compileTool("ok", Tool{Schema: json.RawMessage(`{"type":"object","description":"from the schema"}`), Func: fn})
	if err != nil || c.description != "from the schema" {
		t.Errorf("description %q, %v", c.description, err)
	}
}

// routes are the routes the specs of this package's tests may name.
var routes = map[string]bool{"report": true, "code": true, "realtime": true}
