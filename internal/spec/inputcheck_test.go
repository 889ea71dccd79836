package spec

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/problem"
)

// checkInput parses text, sets its input and checks it as a submit does.
func checkInput(t *testing.T, text string, input map[string]any, lim Limits) []string {
	t.Helper()
	s, err := ParseSpec("w.yaml", []byte(text), routes, DefaultLimits())
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if input != nil {
		s.Input = input
	}
	return problem.Lines(CheckInput(context.Background(), s, lim))
}

// A concurrency key that reads a field the input lacks is refused at
// submit naming the step and the field, not run under the key "<no
// value>" that every workflow without the field would share; so is one
// the input holds as null, and a key that renders empty.
func TestAConcurrencyKeyReadingAMissingFieldIsRefused(t *testing.T) {
	step := "name: x\nsteps:\n  - id: a\n    route: report\n    prompt: hi\n    concurrency: { key: %q, limit: 1 }\n"
	top := "name: x\nconcurrency: { key: %q, limit: 1 }\nsteps:\n  - { id: a, route: report, prompt: hi }\n"
	for _, c := range []struct {
		name, spec string
		input      map[string]any
		want       string
	}{
		{"missing", fmt.Sprintf(step, "{{ .Input.tenant }}"), map[string]any{"who": "x"},
			`steps[0] (a).concurrency.key: reads .Input.tenant, which the input does not have (it would render "<no value>")`},
		{"missing inside text", fmt.Sprintf(step, "tenant-{{ .Input.org.id }}"), map[string]any{"org": map[string]any{"name": "n"}},
			`steps[0] (a).concurrency.key: reads .Input.org.id, which the input does not have`},
		{"null", fmt.Sprintf(step, "{{ .Input.tenant }}"), map[string]any{"tenant": nil},
			`steps[0] (a).concurrency.key: reads .Input.tenant, which the input does not have`},
		{"the workflow's", fmt.Sprintf(top, "{{ .Input.tenant }}"), map[string]any{},
			`concurrency.key: reads .Input.tenant, which the input does not have`},
		{"by index", fmt.Sprintf(step, `{{ index .Input "tenant" }}`), map[string]any{"who": "x"},
			`steps[0] (a).concurrency.key: renders "<no value>": it reads a value the input does not have`},
		{"empty", fmt.Sprintf(step, "{{ with .Input.tenant }}{{ . }}{{ end }}"), map[string]any{"who": "x"},
			`steps[0] (a).concurrency.key: renders empty`},
	} {
		t.Run(c.name, func(t *testing.T) {
			lines := checkInput(t, c.spec, c.input, DefaultLimits())
			if len(lines) != 1 || !strings.Contains(lines[0], c.want) {
				t.Fatalf("got %q, want one line with %q", lines, c.want)
			}
		})
	}
	ok := fmt.Sprintf(step, "{{ if .Input.tenant }}{{ .Input.tenant }}{{ else }}shared{{ end }}")
	for _, in := range []map[string]any{{"tenant": "acme"}, {"who": "x"}} {
		if lines := checkInput(t, ok, in, DefaultLimits()); len(lines) != 0 {
			t.Errorf("a key that handles a missing field, input %v: %q", in, lines)
		}
	}
}

// A signal step's match over the input alone is checked as a key is: a
// field the input lacks would wait for a signal matching "<no value>".
// One that reads a step's output is known only when it runs.
func TestASignalMatchReadingAMissingFieldIsRefused(t *testing.T) {
	spec := "name: x\nsteps:\n  - { id: a, route: report, prompt: hi }\n  - { id: pay, depends_on: [a], wait_for: { signal: paid, match: %q } }\n"
	lines := checkInput(t, fmt.Sprintf(spec, "order-{{ .Input.order }}"), map[string]any{"who": "x"}, DefaultLimits())
	if len(lines) != 1 || !strings.Contains(lines[0], "steps[1] (pay).wait_for.match: reads .Input.order, which the input does not have") {
		t.Fatalf("got %q", lines)
	}
	for _, c := range []struct {
		match string
		input map[string]any
	}{{"order-{{ .Input.order }}", map[string]any{"order": 42}}, {"{{ .Steps.a.Output }}", map[string]any{}}} {
		if lines := checkInput(t, fmt.Sprintf(spec, c.match), c.input, DefaultLimits()); len(lines) != 0 {
			t.Errorf("%q over %v: %q", c.match, c.input, lines)
		}
	}
}

// A map over a list known at submit (the input's, or the spec's own
// input:) longer than its max_items or limits.max_map_items is refused
// then, naming the step, the count and the limit, not dead-lettered when
// it runs; one over a step's output is sized when it runs.
func TestAMapOverAKnownListIsSizedAtSubmit(t *testing.T) {
	items := make([]any, 10000)
	for i := range items {
		items[i] = i
	}
	mapSpec := "name: x\nsteps:\n  - id: each\n    route: report\n    for_each: \"{{ .Input.items }}\"\n    prompt: \"{{ .Item }}\"\n"
	lines := checkInput(t, mapSpec, map[string]any{"items": items}, DefaultLimits())
	if len(lines) != 1 || !strings.Contains(lines[0], "steps[0] (each).for_each: yields 10000 items over the input, over the step's max_items of 1000") {
		t.Fatalf("got %q", lines)
	}
	withMax := strings.Replace(mapSpec, "    prompt:", "    max_items: 10000\n    prompt:", 1)
	lim := DefaultLimits() // limits.max_map_items: 10,000
	if lines := checkInput(t, withMax, map[string]any{"items": items}, lim); len(lines) != 0 {
		t.Fatalf("within max_items: %q", lines)
	}
	lim.MaxMapItems = 5000 // a producer whose limit is under the step's (a spec parsed elsewhere)
	if lines := checkInput(t, withMax, map[string]any{"items": items}, lim); len(lines) != 1 || !strings.Contains(lines[0], "yields 10000 items over the input, over limits.max_map_items of 5000") {
		t.Fatalf("over limits.max_map_items: %q", lines)
	}
	literal := "name: x\ninput: { items: [" + strings.Repeat("1, ", 1500) + "1] }\nsteps:\n  - id: each\n    route: report\n    for_each: \"{{ .Input.items }}\"\n    prompt: \"{{ .Item }}\"\n"
	if lines := checkInput(t, literal, nil, DefaultLimits()); len(lines) != 1 || !strings.Contains(lines[0], "yields 1501 items over the input, over the step's max_items of 1000") {
		t.Fatalf("the spec's own list: %q", lines)
	}
	for _, c := range []struct {
		input map[string]any
		want  string
	}{{map[string]any{"other": 1}, "steps[0] (each).for_each: reads .Input.items, which the input does not have"},
		{map[string]any{"items": "abc"}, `steps[0] (each).for_each: yields "abc" over the input, not a list`}} {
		if lines := checkInput(t, mapSpec, c.input, DefaultLimits()); len(lines) != 1 || !strings.Contains(lines[0], c.want) {
			t.Errorf("%v: got %q, want %q", c.input, lines, c.want)
		}
	}
	overOutput := "name: x\nsteps:\n  - { id: plan, route: report, prompt: hi, output: { format: json } }\n  - id: each\n    route: report\n    depends_on: [plan]\n    for_each: \"{{ .Steps.plan.JSON.items }}\"\n    prompt: \"{{ .Item }}\"\n"
	if lines := checkInput(t, overOutput, map[string]any{}, DefaultLimits()); len(lines) != 0 {
		t.Fatalf("a map over a step's output: %q", lines)
	}
}
