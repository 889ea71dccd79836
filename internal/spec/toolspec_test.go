package spec

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/problem"
)

const toolsSpec = `name: t
steps:
  - id: a
    route: report
    prompt: hi
    max_turns: 5
    tools:
      - fetch_figure
      - { name: weather, description: Weather now, parameters: { type: object } }
`

// max_turns defaults to 8, capped by a lower limit, which the stored spec
// then carries.
func TestMaxTurnsDefaults(t *testing.T) {
	spec := strings.Replace(toolsSpec, "    max_turns: 5\n", "", 1)
	s, err := ParseSpec("w.yaml", []byte(spec), routes, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Step("a"); MaxTurns(st) != DefaultMaxTurns || st.MaxTurns != 0 {
		t.Errorf("default max turns %d (field %d)", MaxTurns(st), st.MaxTurns)
	}
	s, err = ParseSpec("w.yaml", []byte(spec), routes, limitsWith(func(l *Limits) { l.MaxTurns = 3 }))
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Step("a"); st.MaxTurns != 3 {
		t.Errorf("under a limit of 3 the default is %d", st.MaxTurns)
	}
}

// Tools by name and by mapping; the stored (JSON) spec keeps each form;
// Needs reports both; max_turns is kept.
func TestToolsByNameAndByMapping(t *testing.T) {
	s, err := ParseSpec("w.yaml", []byte(toolsSpec), routes, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	st, _ := s.Step("a")
	if len(st.Tools) != 2 || !NamedTool(st.Tools[0]) || st.Tools[0].Name != "fetch_figure" || NamedTool(st.Tools[1]) || st.Tools[1].Description != "Weather now" {
		t.Fatalf("tools %+v", st.Tools)
	}
	if MaxTurns(st) != 5 {
		t.Errorf("max turns %d", MaxTurns(st))
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"tools":["fetch_figure",{"name":"weather"`) || !strings.Contains(string(b), `"max_turns":5`) {
		t.Fatalf("stored spec %s", b)
	}
	var back Spec
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if bt := back.Steps[0].Tools; !NamedTool(bt[0]) || NamedTool(bt[1]) || bt[1].Parameters["type"] != "object" {
		t.Errorf("read back %+v", bt)
	}
	var tools []string
	for _, n := range s.Needs() {
		if n.Kind == "tool" {
			tools = append(tools, n.Name)
		}
	}
	if strings.Join(tools, ",") != "fetch_figure,weather" {
		t.Errorf("needs tools %v", tools)
	}
}

func TestToolSpecErrors(t *testing.T) {
	cases := []struct{ name, spec, want string }{
		{"over the limit", strings.Replace(toolsSpec, "max_turns: 5", "max_turns: 21", 1), `steps[0] (a).max_turns: 21 is over the limit of 20 (limits.max_turns)`},
		{"under one", strings.Replace(toolsSpec, "max_turns: 5", "max_turns: -1", 1), `steps[0] (a).max_turns: -1 is under 1`},
		{"without tools", "name: t\nsteps:\n  - { id: a, route: report, prompt: hi, max_turns: 3 }\n", `steps[0] (a).max_turns: is for steps with tools`},
		{"on a code step", "name: t\nsteps:\n  - { id: a, run: f, max_turns: 3 }\n", `steps[0] (a).max_turns: is for steps with tools; a code step (run: f) has none`},
		{"bad name", strings.Replace(toolsSpec, "- fetch_figure", "- fetch figure", 1), `steps[0] (a).tools[0].name: "fetch figure" is not a tool name`},
		{"twice", strings.Replace(toolsSpec, "name: weather", "name: fetch_figure", 1), `tools[1].name: "fetch_figure" is listed twice`},
		{"unknown field", strings.Replace(toolsSpec, "description: Weather now", "descripton: Weather now", 1), `w.yaml:9: unknown field "descripton" in a tool`},
		{"a list", strings.Replace(toolsSpec, "- fetch_figure", "- [fetch_figure]", 1), `w.yaml:8: a tool is a name or a mapping`},
	}
	wantOneProblem(t, cases)
	_, err := ParseSpec("w.yaml", []byte(strings.Replace(toolsSpec, "max_turns: 5", "max_turns: 5", 1)), routes, limitsWith(func(l *Limits) { l.MaxTurns = 4 }))
	if lines := problem.Lines(err); len(lines) != 1 || !strings.Contains(lines[0], "5 is over the limit of 4") {
		t.Errorf("limit of 4: %q", lines)
	}
}
