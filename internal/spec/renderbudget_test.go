package spec

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentq/agentq/internal/problem"
)

// list is [0 1 … n-1] as encoding/json would give it.
func list(n int) []any {
	l := make([]any, n)
	for i := range l {
		l[i] = float64(i)
	}
	return l
}

// budgetError renders text over input and wants a render stopped by the
// limit on what (any limit if what is empty).
func budgetError(t *testing.T, text string, input map[string]any, what string) *RenderBudgetError {
	t.Helper()
	tmpl, err := parseTemplate("s.prompt", text)
	if err != nil {
		t.Fatal(err)
	}
	out, err := render(tmpl, input, nil)
	var be *RenderBudgetError
	if !errors.As(err, &be) || !errors.Is(err, ErrRenderBudget) || (what != "" && be.What != what) || out != "" {
		t.Fatalf("render = %d bytes, %v; want a render stopped at its limit on %s", len(out), err, what)
	}
	if !strings.HasPrefix(err.Error(), "template for step s (prompt) stopped: it would take more than ") {
		t.Fatalf("reason %q does not name the step", err)
	}
	return be
}

// Three ranges over 200 items are 8,000,000 iterations: the render stops at
// 1,000,000.
func TestRenderStopsAtTheIterationLimit(t *testing.T) {
	text := `{{ range .Input.l }}{{ range $.Input.l }}{{ range $.Input.l }}{{ end }}{{ end }}{{ end }}`
	be := budgetError(t, text, map[string]any{"l": list(200)}, "iterations")
	if want := "template for step s (prompt) stopped: it would take more than 1,000,000 iterations, the limit per render"; be.Error() != want {
		t.Fatalf("reason %q, want %q", be, want)
	}
	// ranges over integers count too
	budgetError(t, `{{ range 2000000000 }}{{ end }}`, nil, "iterations")
	// a range that leaves at once is charged for every item (ranging over a
	// map sorts all its keys first, and map items weigh more)
	m := map[string]any{}
	for i := range 10000 {
		m[fmt.Sprint(i)] = i
	}
	budgetError(t, `{{ range 500 }}{{ range $.Input.m }}{{ break }}{{ end }}{{ end }}`, map[string]any{"m": m}, "template operations")
	budgetError(t, `{{ range 1000 }}{{ range $.Input.l }}{{ break }}{{ end }}{{ end }}`, map[string]any{"l": list(10000)}, "iterations")
}

// One range of 200,000 items is under the iteration limit, but not with a
// body of 20 lookups.
func TestRenderStopsAtTheOperationLimit(t *testing.T) {
	body := strings.Repeat(`{{ if eq $.Input.a.b "x" }}{{ end }}`, 20)
	budgetError(t, `{{ range 200000 }}`+body+`{{ end }}`, map[string]any{"a": map[string]any{"b": "y"}}, "template operations")
	// comparing long strings costs an operation a KiB: 200,000 comparisons
	// of 400 KiB would take seconds
	long := map[string]any{"a": strings.Repeat("x", 400<<10), "b": strings.Repeat("x", 400<<10)}
	budgetError(t, `{{ range 200000 }}{{ if eq $.Input.a $.Input.b }}{{ end }}{{ end }}`, long, "template operations")
	budgetError(t, `{{ range 200000 }}{{ index $.Input $.Input.a }}{{ end }}`, long, "template operations")
	// the same body over a few items renders
	tmpl, _ := parseTemplate("s.prompt", `{{ range 1000 }}`+body+`{{ end }}ok`)
	if out, err := render(tmpl, map[string]any{"a": map[string]any{"b": "y"}}, nil); err != nil || out != "ok" {
		t.Fatalf("render = %q, %v", out, err)
	}
}

// Text made and thrown away counts: a megabyte per printf in a loop, one
// printf of a thousand megabyte verbs (refused before it runs), print of
// many copies of a long input.
func TestRenderStopsAtTheTextLimit(t *testing.T) {
	const what = "bytes of text from print functions"
	budgetError(t, `{{ range 100 }}{{ printf "%01000000d" 1 | len }}{{ end }}`, nil, what)
	budgetError(t, `{{ printf "`+strings.Repeat("%01000000d", 1000)+`" | len }}`, nil, what)
	budgetError(t, `{{ printf "%[1]*[2]d" 1000000 1 | len }}{{ printf "`+strings.Repeat("%[1]v", 100)+`" .Input.s | len }}`, map[string]any{"s": strings.Repeat("x", 1<<20)}, what)
	budgetError(t, `{{ print`+strings.Repeat(" .Input.s", 100)+` | len }}`, map[string]any{"s": strings.Repeat("x", 1<<20)}, what)
	budgetError(t, `{{ range 20 }}{{ html $.Input.s | len }}{{ end }}`, map[string]any{"s": strings.Repeat("<", 1<<20)}, what)
	// a long answer printed once is fine
	tmpl, _ := parseTemplate("s.prompt", `{{ printf "%s" .Input.s | len }}`)
	if out, err := render(tmpl, map[string]any{"s": strings.Repeat("x", 2<<20)}, nil); err != nil || out != "2097152" {
		t.Fatalf("render = %q, %v", out, err)
	}
}

// countdown is a context whose Err reports it canceled from its n-th call
// on, so a test can cancel in the middle of a render without timing.
type countdown struct {
	context.Context
	n atomic.Int64
}

func (c *countdown) Err() error {
	if c.n.Add(-1) <= 0 {
		return context.Canceled
	}
	return nil
}

func TestRenderStopsWhenItsContextIsDone(t *testing.T) {
	tmpl, _ := parseTemplate("s.prompt", `{{ range .Input.l }}{{ range $.Input.l }}{{ . }}{{ end }}{{ end }}`)
	ctx := &countdown{Context: context.Background()}
	ctx.n.Store(5) // the check before the render, the outer range and three inner ones
	out, err := RenderContext(ctx, tmpl, map[string]any{"l": list(10)}, nil)
	if !errors.Is(err, context.Canceled) || out != "" || !strings.HasPrefix(err.Error(), "template for step s (prompt) stopped: ") {
		t.Fatalf("render = %q, %v; want it stopped by its context", out, err)
	}
	if n := ctx.n.Load(); n != 0 {
		t.Fatalf("the render went on after its context was done (%d more checks)", -n)
	}
	// and not at all with a context that is already done
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RenderContext(done, tmpl, nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("render with a done context = %v", err)
	}
}

// Six ranges over a 50-item input are 15,625,000,000 iterations: refused
// at submit time, with the prompt field's line.
func TestDeeplyNestedRangesAreRefusedAtSubmit(t *testing.T) {
	six := strings.Repeat("{{ range $.Input.l }}", 6) + "x" + strings.Repeat("{{ end }}", 6)
	spec := "name: deep\ninput: { l: [" + strings.TrimSuffix(strings.Repeat("1, ", 50), ", ") + "] }\n" +
		"defaults: { route: report }\nsteps:\n  - id: s\n    # six deep\n    prompt: \"" + six + "\"\n"
	_, err := ParseSpec("w.yaml", []byte(spec), routes, DefaultLimits())
	want := "w.yaml:7: steps[0] (s).prompt: template: s.prompt:1:114: range nested 6 deep, over the limit of 3"
	if lines := problem.Lines(err); len(lines) != 1 || !strings.HasPrefix(lines[0], want) {
		t.Fatalf("got %q, want one line starting %q", lines, want)
	}
	// if and with do not multiply, else runs once, and three deep is allowed
	for text, ok := range map[string]bool{
		`{{ range .Input.l }}{{ if . }}{{ with . }}{{ range $.Input.l }}{{ range $.Input.l }}{{ end }}{{ end }}{{ end }}{{ end }}{{ end }}`:                    true,
		`{{ range .Input.l }}{{ range $.Input.l }}{{ range $.Input.l }}{{ else }}{{ range $.Input.l }}{{ end }}{{ end }}{{ end }}{{ end }}`:                    true,
		`{{ range .Input.l }}{{ range $.Input.l }}{{ if . }}{{ else }}{{ range $.Input.l }}{{ range $.Input.l }}{{ end }}{{ end }}{{ end }}{{ end }}{{ end }}`: false,
		`{{ range .Input.l }}{{ with . }}{{ range $.Input.l }}{{ range $.Input.l }}{{ range $.Input.l }}{{ end }}{{ end }}{{ end }}{{ end }}{{ end }}`:         false,
	} {
		_, err := templateRefs("s.prompt", text)
		if (err == nil) != ok || (err != nil && !strings.Contains(err.Error(), "over the limit of 3")) {
			t.Errorf("%s: %v, want accepted=%v", text, err, ok)
		}
	}
}

// A prompt cannot call a template, so it cannot recurse: {{template}},
// {{block}} and a {{define}} of the prompt's own name are refused at
// submit. Were one rendered anyway, every call counts as an iteration.
func TestTemplateRecursionIsRefusedAndBounded(t *testing.T) {
	for _, text := range []string{
		`{{ define "r" }}{{ template "r" . }}{{ end }}{{ template "r" . }}`,
		`{{ block "r" . }}{{ template "r" . }}{{ end }}`,
		`{{ define "s.prompt" }}{{ template "s.prompt" . }}{{ end }}`,
	} {
		if _, err := templateRefs("s.prompt", text); err == nil || !strings.Contains(err.Error(), "{{template}} is not allowed") {
			t.Errorf("%s: %v", text, err)
		}
	}
	// 2^40 calls that print nothing, each level calling the next twice
	var b strings.Builder
	for i := range 40 {
		fmt.Fprintf(&b, `{{ define "t%d" }}{{ template "t%d" . }}{{ template "t%d" . }}{{ end }}`, i, i+1, i+1)
	}
	b.WriteString(`{{ define "t40" }}{{ end }}{{ template "t0" . }}`)
	budgetError(t, b.String(), nil, "")
	// the prompt calling itself twice a level, down a nested input
	nested := map[string]any{}
	for range 40 {
		nested = map[string]any{"Input": nested}
	}
	budgetError(t, `{{ define "s.prompt" }}{{ with .Input }}{{ template "s.prompt" . }}{{ template "s.prompt" . }}{{ end }}{{ end }}`, nested, "")
}

// How long a render takes to reach each limit (one core), each with the
// work that costs the most per operation charged.
func BenchmarkRenderStopsAtItsBudget(b *testing.B) {
	lookups := strings.Repeat(`{{ if eq $.Input.a.b "x" }}{{ end }}`, 20)
	m := map[string]any{}
	for i := range 10000 {
		m[fmt.Sprint(i)] = i
	}
	small := map[string]any{"l": list(200), "a": map[string]any{"b": "y"}, "m": m}
	long := map[string]any{"l": list(200), "s": strings.Repeat("x", 400<<10), "t": strings.Repeat("x", 400<<10)}
	for _, c := range []struct {
		name, text, what string
		input            map[string]any
	}{
		{"iterations/3x200", `{{ range .Input.l }}{{ range $.Input.l }}{{ range $.Input.l }}{{ end }}{{ end }}{{ end }}`, "iterations", small},
		{"operations/printing", `{{ range .Input.l }}{{ range $.Input.l }}{{ range $.Input.l }}{{ $.Input.a.b }}{{ end }}{{ end }}{{ end }}`, "template operations", small},
		{"operations/lookups", `{{ range .Input.l }}{{ range $.Input.l }}` + lookups + `{{ end }}{{ end }}`, "template operations", small},
		{"operations/long-compares", `{{ range .Input.l }}{{ range $.Input.l }}{{ if eq $.Input.s $.Input.t }}{{ end }}{{ end }}{{ end }}`, "template operations", long},
		{"operations/map-sorts", `{{ range 500 }}{{ range $.Input.m }}{{ break }}{{ end }}{{ end }}`, "template operations", small},
		{"text/printf-width", `{{ range 100 }}{{ printf "%01000000d" 1 | len }}{{ end }}`, "bytes of text from print functions", small},
	} {
		tmpl, err := parseTemplate("s.prompt", c.text)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				var be *RenderBudgetError
				if _, err := render(tmpl, c.input, nil); !errors.As(err, &be) || be.What != c.what {
					b.Fatalf("render: %v", err)
				}
			}
		})
	}
}
