package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"text/template"
)

// renderPlain is how prompts rendered before renders were bounded: the
// same parse, no rewriting, the builtins as they are.
func renderPlain(name, text string, input map[string]any, steps map[string]StepView) (string, error) {
	t, err := template.New(name).Option("missingkey=zero").Parse(text)
	if err != nil {
		return "", err
	}
	var b limitedBuilder
	if err := t.Execute(&b, DataOf(input, steps, nil)); err != nil {
		return "", fmt.Errorf("template %s: %w", name, err)
	}
	return b.String(), nil
}

// sameRender wants text to render to the same prompt, or fail with the same
// error, bounded and plain.
func sameRender(t *testing.T, text string, input map[string]any, steps map[string]StepView) {
	t.Helper()
	want, wantErr := renderPlain("s.prompt", text, input, steps)
	tmpl, err := parseTemplate("s.prompt", text)
	if err != nil {
		t.Fatalf("%q does not parse: %v", text, err)
	}
	got, err := render(tmpl, input, steps)
	if got != want || fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Errorf("%q renders\n  %q, %v\nwas\n  %q, %v", text, got, err, want, wantErr)
	}
}

// The rewritten templates and the counted builtins render every template
// exactly as text/template did: representative ones here, then every
// template in the fuzz corpus and the examples.
func TestBoundedRenderIsUnchanged(t *testing.T) {
	answer := `{"items": [{"name": "a", "n": 1}, {"name": "b", "n": 2.5}], "tags": {"x": "1", "y": null}, "ok": true, "n": 12345678901234567890}`
	v := StepView{Output: answer}
	v.JSON, _ = ParseJSONAnswer(answer)
	steps := map[string]StepView{"a": v, "m": {Missing: true}, "d": {Output: "fallback", Degraded: true}}
	input := map[string]any{"q": "why?", "list": []any{"x", 2, 3.5, nil, true}, "empty": []any{},
		"obj": map[string]any{"k": "v", "n": 3, "z": []any{1, 2}}, "n": 3, "html": `<a href="x">&'</a>`}
	for _, text := range []string{
		`Q: {{ .Input.q }} A: {{ .Steps.a.Output }} {{ .Steps.m.Missing }} {{ .Steps.d.Degraded }}`,
		`{{ range $i, $v := .Input.list }}{{ $i }}={{ $v }};{{ end }}`,
		`{{ range $v := .Input.list }}[{{ $v }}]{{ end }}{{ range .Input.list }}<{{ . }}>{{ end }}`,
		`{{ range .Input.empty }}x{{ else }}empty{{ end }} {{ range .Input.missing }}x{{ else }}none{{ end }}`,
		`{{ range $k, $v := .Input.obj }}{{ $k }}:{{ $v }} {{ end }}{{ range .Steps.a.JSON.tags }}{{ . }},{{ end }}`,
		`{{ range .Steps.a.JSON.items }}- {{ .name }} ({{ printf "%v" .n }}){{ "\n" }}{{ end }}`,
		`{{ range $i, $it := .Steps.a.JSON.items }}{{ if $i }}, {{ end }}{{ index $it "name" }}{{ end }}`,
		`{{ range 4 }}{{ . }}{{ end }} {{ range $i := .Input.n }}{{ $i }}{{ end }}`,
		`{{ range .Input.list }}{{ if eq (printf "%v" .) "3.5" }}{{ break }}{{ end }}{{ if not . }}{{ continue }}{{ end }}{{ . }}{{ end }}`,
		`{{ len .Input.list }} {{ index .Input.list 1 }} {{ slice .Input.list 1 3 }} {{ .Input.list }} {{ .Input.obj }} {{ .Input }}`,
		`{{ .Steps.a.JSON }} {{ .Steps.a.JSON.n }} {{ .Steps.a.JSON.ok }} {{ .Steps.a }}`,
		`{{ printf "%d %5.2f %-4s| %q %x %T %v %#v" 3 2.5 "ab" "q\x00" "hi" .Input.list .Input.obj .Input.obj }}`,
		`{{ printf "%[2]s %[1]s %*d %.*f %!" "a" "b" 4 7 2 3.14159 }} {{ printf "%d" }} {{ printf "x" 1 "two" }} {{ printf "%d" "s" }}`,
		`{{ print "a" "b" 1 2 "c" nil .Input.list }}|{{ println "a" 1 }}|{{ print }}|{{ println }}`,
		`{{ html .Input.html }} {{ js .Input.html }} {{ urlquery .Input.html "a b" }} {{ html 1 "x" }} {{ .Input.html | html | len }}`,
		`{{ with .Steps.a.JSON.tags }}{{ .x }}{{ else }}no{{ end }} {{ with $x := .Input.obj.k }}{{ $x }}{{ end }}`,
		`{{ if and .Input.q (not .Steps.m.Output) }}yes{{ else if .Input.n }}n{{ else }}no{{ end }} {{ or .Steps.m.Output "dflt" }}`,
		`{{ $n := 0 }}{{ range .Input.list }}{{ $n = . }}{{ end }}{{ $n }} {{ range $i, $v := .Input.list }}{{ end }}{{ $i := 9 }}{{ $i }}`,
		`{{ range .Input.list }}{{ range $.Input.obj.z }}{{ range $.Input.empty }}{{ else }}.{{ end }}{{ end }}{{ end }}`,
		`{{ lt 1 2 }} {{ le 2 2 }} {{ gt "b" "a" }} {{ ne .Input.n 3 }} {{ eq .Input.q "why?" "x" }} {{ call .Input.q }}`,
		`{{ eq .Input.missing nil }} {{ eq .Steps.m .Steps.m }} {{ .Input.q | eq "why?" }} {{ eq (index .Input.list 0) "x" }} {{ range .Input.list }}{{ eq . "x" 2 }}{{ end }}`,
		`{{ index .Input.obj .Input.q }}|{{ index .Input.obj "k" }}|{{ index .Steps.a.JSON.items 0 "name" }}|{{ $k := "z" }}{{ index .Input.obj $k 1 }}|{{ ge .Input.n 3 }}`,
		`{{ eq .Input.list .Input.list }}`,               // not comparable: the same error
		`{{ lt .Input.q 1 }}`,                            // incompatible: the same error
		`{{ eq .Steps.a .Steps.d }}`,                     // a map inside: the same error
		`{{ index .Input.obj .Input.list }}`,             // a bad key: the same error
		`{{ range .Input.list }}{{ index }}{{ end }}`,    // too few arguments: the same error
		`{{ range .Input.q }}{{ end }}`,                  // a string cannot be ranged: the same error
		`{{ range $i, $v := 3 }}{{ end }}`,               // an integer has no index: the same error
		`{{ range .Input.list }}{{ .x }}{{ end }}`,       // a field of a string: the same error
		`{{ range (index .Input.list 9) }}{{ end }}`,     // an error inside the ranged pipeline
		`{{ define "x" }}{{ . }}{{ end }}{{ .Input.q }}`, // a define that is never called
	} {
		sameRender(t, text, input, steps)
	}

	// every template of the fuzz corpus, with the data the fuzz target uses
	files, err := filepath.Glob("testdata/fuzz/FuzzRenderTemplate/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fuzz corpus: %v", err)
	}
	checked := 0
	for _, f := range files {
		text, in, ans, ok := corpusEntry(t, f)
		if !ok {
			continue
		}
		if _, err := templateRefs("p", text); err != nil {
			continue // refused at submit time
		}
		v := StepView{Output: ans}
		v.JSON, _ = ParseJSONAnswer(ans)
		sameRender(t, text, map[string]any{"q": in}, map[string]StepView{"a": v})
		checked++
	}
	// and the examples, every step given the answer "x"
	specs, _ := filepath.Glob("../examples/*.yaml")
	for _, f := range specs {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := ParseSpec(f, data, nil, DefaultLimits())
		if err != nil {
			continue // not a workflow (agentq.yaml)
		}
		views := map[string]StepView{}
		for _, st := range spec.Steps {
			views[st.ID] = StepView{Output: "x"}
		}
		for _, st := range spec.Steps {
			sameRender(t, st.Prompt, spec.Input, views)
			checked++
		}
	}
	t.Logf("%d corpus and example templates render as before", checked)
}

// corpusEntry reads a FuzzRenderTemplate corpus file: three strings.
func corpusEntry(t *testing.T, path string) (text, input, answer string, ok bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 4 || lines[0] != "go test fuzz v1" {
		return "", "", "", false
	}
	var vals []string
	for _, l := range lines[1:] {
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(l, "string("), ")"))
		if err != nil {
			return "", "", "", false
		}
		vals = append(vals, s)
	}
	return vals[0], vals[1], vals[2], true
}
