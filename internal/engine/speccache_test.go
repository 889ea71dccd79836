package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/spec"
)

// chordSpec is a chord of n members and a body whose prompts read the
// input and the members' outputs.
func chordSpec(t testing.TB, n int, input any) []byte {
	t.Helper()
	var b strings.Builder
	b.WriteString("name: chord\ndefaults: { route: r }\nsteps:\n")
	var ids []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("m%d", i)
		ids = append(ids, id)
		fmt.Fprintf(&b, "  - { id: %s, prompt: \"member %d of {{ .Input.topic }}\" }\n", id, i)
	}
	fmt.Fprintf(&b, "  - id: body\n    depends_on: [%s]\n    prompt: \"join {{ .Steps.m0.Output }} on {{ .Input.topic }}\"\n", strings.Join(ids, ", "))
	b.WriteString("    output: { format: json, schema: { type: object, required: [answer], properties: { answer: { type: string } } } }\n")
	s, err := spec.ParseSpec("chord.yaml", []byte(b.String()), map[string]bool{"r": true}, spec.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	s.Input = map[string]any{"topic": input}
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestSpecCacheSharesTheShapeNotTheInput(t *testing.T) {
	c := newSpecCache(10)
	a, err := c.parse(chordSpec(t, 3, "apples"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.parse(chordSpec(t, 3, "pears"))
	if err != nil {
		t.Fatal(err)
	}
	if &a.Steps[0] != &b.Steps[0] {
		t.Fatal("two workflows of the same spec did not share its parsed steps")
	}
	if a.Input["topic"] != "apples" || b.Input["topic"] != "pears" {
		t.Fatalf("inputs: %v, %v", a.Input, b.Input)
	}
	body, _ := b.Step("body")
	if spec.PromptTemplate(body) == nil || spec.OutputRequest(body).Check(`{}`) == nil || len(spec.InputsOf(body, nil)) != 3 {
		t.Fatalf("shared body step not prepared: %+v", body)
	}
	got, err := spec.RenderContext(t.Context(), spec.PromptTemplate(body), b.Input, map[string]spec.StepView{"m0": {Output: "x"}})
	if err != nil || got != "join x on pears" {
		t.Fatalf("render with the second input: %q %v", got, err)
	}
	other, err := c.parse(chordSpec(t, 4, "apples"))
	if err != nil {
		t.Fatal(err)
	}
	if len(other.Steps) != 5 || &other.Steps[0] == &a.Steps[0] {
		t.Fatal("a different spec reused another spec's shape")
	}
	if len(c.shapes.m) != 2 {
		t.Fatalf("%d shapes cached, want 2", len(c.shapes.m))
	}
	for i := 0; i < 20; i++ {
		c.shapes.put(fmt.Sprint(i), a, c.max)
	}
	if len(c.shapes.m) != c.max || len(c.shapes.order) != c.max {
		t.Fatalf("cache holds %d (%d in order), bound %d", len(c.shapes.m), len(c.shapes.order), c.max)
	}
	if _, err := c.parse([]byte(`{"steps": [`)); err == nil {
		t.Fatal("a truncated spec parsed")
	}
}

// BenchmarkSpecOfANewWorkflow is what a worker spends on the spec of a
// workflow it has not seen, when it has (shared) or has not (first) seen
// another workflow of the same spec: a chord of 10 members and a body
// with an output schema.
func BenchmarkSpecOfANewWorkflow(b *testing.B) {
	raws := make([][]byte, 64)
	for i := range raws {
		raws[i] = chordSpec(b, 10, fmt.Sprint("topic ", i))
	}
	b.Run("first", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			c := newSpecCache(10)
			if _, err := c.parse(raws[i%len(raws)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("shared", func(b *testing.B) {
		c := newSpecCache(10)
		for i := 0; i < b.N; i++ {
			if _, err := c.parse(raws[i%len(raws)]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
