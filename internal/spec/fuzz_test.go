package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A template that passes the submit-time check renders without panicking
// and reads nothing but .Input and .Steps: {{ call }}, {{ template }},
// methods and other fields are refused at submit time or fail at render.
// It renders what text/template alone renders, unless it stops at its
// budget.
func FuzzRenderTemplate(f *testing.F) {
	f.Add("Q: {{ .Input.q }} A: {{ .Steps.a.Output }}", "why", `{"k": "v"}`)
	f.Add(`{{ .Steps.a.JSON.k }} {{ range .Steps.a.JSON }}{{ . }}{{ end }}`, "x", `{"k": [1, 2]}`)
	f.Add(`{{ call .Input.q }}`, "x", `{}`)
	f.Add(`{{ template "x" }}`, "x", `{}`)
	f.Add(`{{ .Env }}{{ printf "%v" .Input }}`, "x", `[]`)
	f.Add(`{{ len .Steps.a.Output | printf "%d" }}{{ index .Steps.a.JSON "k" }}`, "x", `{"k": 1}`)
	f.Add(`{{ range $i, $v := .Steps.a.JSON }}{{ range $.Steps.a.JSON }}{{ printf "%5d|%[1]q" . }}{{ else }}-{{ end }}{{ end }}`, "x", `[1, 2, 3]`)
	f.Add(`{{ range 100000000 }}{{ html $.Input.q }}{{ end }}`, "<>", `{}`)
	f.Fuzz(func(t *testing.T, text, input, answer string) {
		refs, err := templateRefs("p", text)
		if err != nil {
			return // refused at submit time
		}
		for _, r := range refs {
			if r.step != "a" {
				return // not an ancestor: refused at submit time
			}
		}
		tmpl, err := parseTemplate("p", text)
		if err != nil {
			t.Fatalf("checked template does not parse: %v", err)
		}
		v := StepView{Output: answer}
		v.JSON, _ = ParseJSONAnswer(answer)
		in, steps := map[string]any{"q": input}, map[string]StepView{"a": v}
		out, err := render(tmpl, in, steps)
		if err == nil && len(out) > maxRenderedBytes {
			t.Fatalf("rendered %d bytes, over the limit", len(out))
		}
		if err == nil && strings.Contains(text, "call") && strings.Contains(out, "func(") {
			t.Fatalf("a function leaked into the prompt: %q", out)
		}
		if errors.Is(err, ErrRenderBudget) {
			return // stopped at its budget
		}
		// within its budget, a render is what text/template alone makes
		want, wantErr := renderPlain("p", text, in, steps) // the same maps: %p prints their addresses
		if out != want || fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("bounded render %q, %v; text/template %q, %v", out, err, want, wantErr)
		}
	})
}

// Any model answer is judged without panicking: either one JSON document
// (possibly fenced) or an error that says why not.
func FuzzParseJSONAnswer(f *testing.F) {
	f.Add(`{"query": "select 1"}`)
	f.Add("```json\n{\"a\": [1, 2.5, null]}\n```")
	f.Add(`Sure! {"a": 1}`)
	f.Add(`{"a": "trunc`)
	f.Add("```")
	f.Add(`[1] [2]`)
	f.Fuzz(func(t *testing.T, text string) {
		v, err := ParseJSONAnswer(text)
		if err != nil {
			if v != nil {
				t.Fatal("a value with an error")
			}
			return
		}
		// what was accepted is JSON: it encodes, and decodes to the same
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("accepted %q but cannot encode it: %v", text, err)
		}
		again, err := ParseJSONAnswer(string(b))
		if err != nil {
			t.Fatalf("re-encoded answer %s does not parse: %v", b, err)
		}
		b2, _ := json.Marshal(again)
		if string(b) != string(b2) {
			t.Fatalf("round trip changed the value: %s vs %s", b, b2)
		}
	})
}
