package spec

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/problem"
)

const salesReport = `name: sales-report
input: { question: "Which region grew fastest last quarter?" }
defaults: { route: report, timeout: 60s, max_retries: 8 }
steps:
  - id: sql
    route: code
    prompt: "Write one SQL query that answers: {{ .Input.question }}"
  - id: clean
    depends_on: [sql]
    prompt: "List the data-cleaning steps needed before running: {{ .Steps.sql.Output }}"
  - id: summary
    route: realtime
    prompt: "Summarise today's sales headlines."
    optional: true
    degrade: template
  - id: report
    depends_on: [clean, summary]
    timeout: 120s
    prompt: |
      Write the report. SQL: {{ .Steps.sql.Output }}
      Cleaning: {{ .Steps.clean.Output }}
      Headlines: {{ .Steps.summary.Output }}
`

var routes = map[string]bool{"report": true, "code": true, "realtime": true}

func TestParseGoodSpec(t *testing.T) {
	s, err := ParseSpec("w.yaml", []byte(salesReport), routes, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Roots(); strings.Join(got, ",") != "sql,summary" {
		t.Errorf("roots = %v", got)
	}
	if got := s.Dependents("sql"); strings.Join(got, ",") != "clean" {
		t.Errorf("dependents(sql) = %v", got)
	}
	rep, _ := s.Step("report")
	if strings.Join(rep.inputs, ",") != "clean,summary,sql" {
		t.Errorf("report inputs = %v", rep.inputs)
	}
	r := Resolve(s, rep)
	if r.Route != "report" || r.Timeout.String() != "2m0s" || r.MaxRetries != 8 || r.Queue != "default" {
		t.Errorf("resolved = %+v", r)
	}
	// JSON is accepted too
	js := `{"name":"j","defaults":{"route":"report"},"steps":[{"id":"a","prompt":"hi"}]}`
	if _, err := ParseSpec("w.json", []byte(js), routes, DefaultLimits()); err != nil {
		t.Fatal(err)
	}
}

// A misspelt step field is one line with its line number, beside the
// spec's other problems yaml finds, and in a mapping merged into a step.
func TestUnknownStepFields(t *testing.T) {
	for _, c := range []struct{ name, spec string }{
		{"beside a bad value", strings.Replace(strings.Replace(salesReport, "optional: true", "optinal: true", 1), "timeout: 120s", "timeout: nope", 1)},
		{"merged", "name: m\nsteps:\n  - { id: a, route: code, prompt: hi }\n  - { <<: { route: code,\n      optinal: true }, id: b, prompt: hi }\n"},
	} {
		_, err := ParseSpec("w.yaml", []byte(c.spec), nil, DefaultLimits())
		want := map[string]string{"beside a bad value": `w.yaml:14: unknown field "optinal"`, "merged": `w.yaml:5: unknown field "optinal"`}[c.name]
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %s", c.name, err, want)
		}
		if c.name == "beside a bad value" && !strings.Contains(err.Error(), `bad duration "nope"`) {
			t.Errorf("%s: %v, want the bad duration too", c.name, err)
		}
	}
}

func TestSpecErrors(t *testing.T) {
	cases := []struct{ name, spec, want string }{
		{"unknown field", strings.Replace(salesReport, "optional: true", "optinal: true", 1), `w.yaml:14: unknown field "optinal"`},
		{"unknown route", strings.Replace(salesReport, "route: code", "route: cod", 1), `steps[0] (sql).route: unknown route "cod"`},
		{"duplicate id", strings.Replace(salesReport, "id: clean", "id: sql", 1), `steps[1] (sql).id: "sql" is used by steps[0] too`},
		{"missing dependency", strings.Replace(salesReport, "depends_on: [sql]", "depends_on: [sqll]", 1), `steps[1] (clean).depends_on: unknown step "sqll"`},
		{"cycle", strings.Replace(salesReport, "route: code", "route: code\n    depends_on: [report]", 1), `dependency cycle: sql → report → clean → sql`},
		{"non-ancestor reference", strings.Replace(salesReport, "Summarise today's", "Summarise {{ .Steps.sql.Output }}", 1), `steps[2] (summary).prompt: refers to .Steps.sql`},
		{"sub-second timeout", strings.Replace(salesReport, "timeout: 120s", "timeout: 500ms", 1), `steps[3] (report).timeout: 500ms is under 1s`},
		{"fractional timeout", strings.Replace(salesReport, "timeout: 120s", "timeout: 1500ms", 1), `not whole seconds`},
		{"bad duration", strings.Replace(salesReport, "timeout: 120s", "timeout: soon", 1), `w.yaml:18: bad duration "soon"`},
		{"bad template", strings.Replace(salesReport, "{{ .Input.question }}", "{{ .Input.question ", 1), `steps[0] (sql).prompt: template:`},
		{"template function field", strings.Replace(salesReport, "{{ .Input.question }}", "{{ .Env.HOME }}", 1), `.Env.HOME is not available`},
		{"no steps", "name: x\nsteps: []\n", `steps: is empty`},
		{"empty", "", `spec is empty`},
		{"not utf-8", "name: \xff\xfe\n", `not valid UTF-8`},
		{"no route anywhere", "name: x\nsteps:\n  - id: a\n    prompt: hi\n", `steps[0] (a).route: is empty`},
		{"too big", "name: x\ninput: {a: \"" + strings.Repeat("x", 2<<20) + "\"}\n", `over the limit`},
	}
	wantOneProblem(t, cases)
}

// wantOneProblem parses each spec and wants exactly one problem line that
// contains want.
func wantOneProblem(t *testing.T, cases []struct{ name, spec, want string }) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseSpec("w.yaml", []byte(c.spec), routes, DefaultLimits())
			if err == nil {
				t.Fatal("accepted")
			}
			if lines := problem.Lines(err); len(lines) != 1 || !strings.Contains(lines[0], c.want) {
				t.Fatalf("got %q, want one line containing %q", lines, c.want)
			}
		})
	}
}

func TestTooManySteps(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: x\ndefaults: {route: report}\nsteps:\n")
	for i := 0; i < 5; i++ {
		b.WriteString("  - {id: s" + string(rune('a'+i)) + ", prompt: hi}\n")
	}
	_, err := ParseSpec("w.yaml", []byte(b.String()), routes, limitsWith(func(l *Limits) { l.MaxSteps = 4 }))
	if err == nil || !strings.Contains(err.Error(), "over the limit of 4") {
		t.Fatalf("err = %v", err)
	}
}

func TestRender(t *testing.T) {
	tmpl, _ := parseTemplate("p", "Q: {{ .Input.q }} A: {{ .Steps.a.Output }} missing={{ .Steps.b.Missing }}")
	out, err := render(tmpl,
		map[string]any{"q": "why"}, map[string]StepView{"a": {Output: "because"}, "b": {Missing: true}})
	if err != nil || out != "Q: why A: because missing=true" {
		t.Fatalf("render = %q, %v", out, err)
	}
}

func FuzzParseSpec(f *testing.F) {
	f.Add([]byte(salesReport))
	f.Add([]byte(`{"name":"j","defaults":{"route":"report"},"steps":[{"id":"a","prompt":"{{ .Input.x }}"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSpec("fuzz", data, routes, DefaultLimits())
		if err != nil {
			if len(problem.Lines(err)) == 0 {
				t.Fatal("error without a problem line")
			}
			return
		}
		if len(s.Steps) == 0 || s.findCycle() != nil {
			t.Fatal("accepted a spec without steps or with a cycle")
		}
	})
}

const jsonSpec = `name: structured
defaults: { route: report }
steps:
  - id: sql
    prompt: "SQL for {{ .Input.q }}"
    output:
      format: json
      schema: { type: object, required: [query], properties: { query: { type: string } } }
  - id: use
    depends_on: [sql]
    prompt: "Run {{ .Steps.sql.JSON.query }}"
`

func TestStructuredOutputSpecErrors(t *testing.T) {
	cases := []struct{ name, spec, want string }{
		{"schema does not compile", strings.Replace(jsonSpec, "type: string", "type: strang", 1), `steps[0] (sql).output.schema: does not compile`},
		{"unknown output field", strings.Replace(jsonSpec, "format: json", "format: text\n      schema_x: 1", 1), `unknown field "schema_x"`},
		{"external ref", strings.Replace(jsonSpec, "{ type: string }", `{ $ref: "http://example.invalid/s.json" }`, 1), `schemas must be self-contained`},
		{"schema path without a file", strings.Replace(jsonSpec, "schema: { type: object, required: [query], properties: { query: { type: string } } }", "schema: sql.schema.json", 1), `is a path ("sql.schema.json"), but this spec was not read from a file`},
		{"unknown step field", strings.Replace(jsonSpec, ".JSON.query", ".Json.query", 1), `.Steps.sql.Json is not available`},
		{"temperature", strings.Replace(jsonSpec, "    prompt: \"SQL", "    temperature: 3\n    prompt: \"SQL", 1), `steps[0] (sql).temperature: 3 is not between 0 and 2`},
		{"tool name", strings.Replace(jsonSpec, "    prompt: \"SQL", "    tools: [ { name: \"get weather\" } ]\n    prompt: \"SQL", 1), `steps[0] (sql).tools[0].name: "get weather" is not a tool name`},
		{"tool parameters", strings.Replace(jsonSpec, "    prompt: \"SQL", "    tools: [ { name: w, parameters: { type: string } } ]\n    prompt: \"SQL", 1), `tools[0].parameters: must be a JSON Schema of type object`},
	}
	wantOneProblem(t, cases)
	// a bad format also makes a dependent's .JSON read wrong: both are said
	for _, c := range []struct{ spec, first string }{
		{strings.Replace(jsonSpec, "format: json", "format: xml", 1), `w.yaml:6: steps[0] (sql).output.format: "xml" is not text or json`},
		{strings.Replace(jsonSpec, "format: json", "format: text", 1), `w.yaml:6: steps[0] (sql).output.schema: needs format: json`},
	} {
		_, err := ParseSpec("w.yaml", []byte(c.spec), routes, DefaultLimits())
		if lines := problem.Lines(err); len(lines) != 2 || lines[0] != c.first || !strings.Contains(lines[1], "reads .Steps.sql.JSON") {
			t.Errorf("got %q, want %q and the dependent's problem", lines, c.first)
		}
	}
	// .JSON of a step without output.format json
	textDep := strings.Replace(jsonSpec, "format: json\n      schema: { type: object, required: [query], properties: { query: { type: string } } }", "format: text", 1)
	if _, err := ParseSpec("w.yaml", []byte(textDep), routes, DefaultLimits()); err == nil || !strings.Contains(err.Error(), "reads .Steps.sql.JSON, but step sql has no output.format json") {
		t.Fatalf("err = %v", err)
	}
}

func TestSchemaFromAFileIsInlined(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sql.schema.yaml"), []byte("type: object\nrequired: [query]\nproperties:\n  query: { type: string }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	y := strings.Replace(jsonSpec, "schema: { type: object, required: [query], properties: { query: { type: string } } }", "schema: sql.schema.yaml", 1)
	s, err := ParseSpec(filepath.Join(dir, "w.yaml"), []byte(y), routes, limitsWith(func(l *Limits) { l.SchemaDir = dir }))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(s)
	if !strings.Contains(string(b), `"schema":{"properties":{"query":{"type":"string"}},"required":["query"],"type":"object"}`) {
		t.Fatalf("stored spec does not carry the schema inline: %s", b)
	}
	check := OutputRequest(&s.Steps[0]).Check
	for text, ok := range map[string]bool{
		`{"query": "select 1"}`:                    true,
		"```json\n{\"query\": \"select 1\"}\n```":  true,
		`{"query": 1}`:                             false,
		`Here it is: {"query": "select 1"}`:        false,
		`{"query": "sel`:                           false,
		`{"query": "select 1"} {"query": "again"}`: false,
	} {
		if err := check(text); (err == nil) != ok {
			t.Errorf("check(%q) = %v, want ok=%v", text, err, ok)
		}
	}
	missing := strings.Replace(y, "sql.schema.yaml", "nope.json", 1)
	if _, err := ParseSpec("w.yaml", []byte(missing), routes, limitsWith(func(l *Limits) { l.SchemaDir = dir })); err == nil || !strings.Contains(err.Error(), "output.schema: cannot read nope.json") {
		t.Fatalf("missing schema file: %v", err)
	}
}

func TestRenderJSONField(t *testing.T) {
	spec, err := ParseSpec("w.yaml", []byte(jsonSpec), routes, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	v := ViewOf(spec, "sql", `{"query": "select * from t", "n": 12345678901234567890}`, false, false)
	out, err := render(spec.Steps[1].promptT, nil, map[string]StepView{"sql": v})
	if err != nil || out != "Run select * from t" {
		t.Fatalf("render = %q, %v", out, err)
	}
	// {{ call }} and friends cannot reach anything: the only data are maps
	for _, bad := range []string{`{{ call .Steps.sql.JSON.query }}`, `{{ .Steps.sql.JSON.query.Method }}`} {
		tmpl, err := parseTemplate("p", bad)
		if err != nil {
			continue
		}
		if _, err := render(tmpl, nil, map[string]StepView{"sql": v}); err == nil {
			t.Errorf("%s rendered", bad)
		}
	}
}

// Template injection: nothing beyond .Input and the ancestors' .Steps is
// reachable, and text that arrives through inputs or outputs is never
// executed as a template.
func TestTemplateInjection(t *testing.T) {
	refused := map[string]string{
		`{{ template "x" }}`: "{{template}} is not allowed",
		`{{ define "x" }}hi{{ end }}{{ block "y" . }}{{ end }}`: "{{template}} is not allowed",
		`{{ .Steps }}`:            ".Steps is not available",
		`{{ .Env.HOME }}`:         ".Env.HOME is not available",
		`{{ .Steps.sql.Prompt }}`: ".Steps.sql.Prompt is not available",
	}
	for text, want := range refused {
		y := strings.Replace(jsonSpec, `"Run {{ .Steps.sql.JSON.query }}"`, strconv.Quote(text), 1)
		if _, err := ParseSpec("w.yaml", []byte(y), routes, DefaultLimits()); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", text, err, want)
		}
	}
	// accepted at submit time, but nothing to call at render time
	tmpl, _ := parseTemplate("p", `{{ call .Input.q }}`)
	if _, err := render(tmpl, map[string]any{"q": "os.Exit"}, nil); err == nil {
		t.Error("{{ call }} on an input rendered")
	}
	// an input or an upstream answer that looks like a template stays text
	tmpl, _ = parseTemplate("p", `Q: {{ .Input.q }} A: {{ .Steps.a.Output }}`)
	out, err := render(tmpl, map[string]any{"q": "{{ .Env }}"}, map[string]StepView{"a": {Output: `{{ template "x" }}`}})
	if err != nil || out != `Q: {{ .Env }} A: {{ template "x" }}` {
		t.Fatalf("render = %q, %v", out, err)
	}
}

// Every problem of a spec in one pass, each at the line of the field it
// names, capped at 50.
func TestSpecProblemsAllAtOnceAtTheirFieldsLines(t *testing.T) {
	spec := `name: many
steps:
  - id: a
    route: nope
    prompt: "hi"
  - id: b
    route: report
    timeout: 500ms
    prompt: "{{ .Steps.a.Output }}"
  - id: c
    route: report
    prompt: ""
    depends_on: [a]
`
	_, err := ParseSpec("w.yaml", []byte(spec), routes, DefaultLimits())
	want := []string{
		`w.yaml:4: steps[0] (a).route: unknown route "nope"`,
		`w.yaml:8: steps[1] (b).timeout: 500ms is under 1s`,
		`w.yaml:12: steps[2] (c).prompt: is empty`,
		`w.yaml:9: steps[1] (b).prompt: refers to .Steps.a, which is not a step it depends on`,
	}
	lines := problem.Lines(err)
	if len(lines) != len(want) {
		t.Fatalf("got %d problems %q, want %d", len(lines), lines, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("problem %d: %q, want %q…", i, lines[i], w)
		}
	}
	var b strings.Builder
	b.WriteString("name: x\nsteps:\n")
	for i := 0; i < 60; i++ {
		b.WriteString("  - { id: s" + strconv.Itoa(i) + ", route: nope, prompt: hi }\n")
	}
	lines = problem.Lines(func() error { _, err := ParseSpec("w.yaml", []byte(b.String()), routes, DefaultLimits()); return err }())
	if len(lines) != 51 || !strings.Contains(lines[50], "and 10 more problems") {
		t.Errorf("60 problems: %d lines, last %q; want 50 and a count of the rest", len(lines), lines[len(lines)-1])
	}
}

// Aliases cannot multiply the unknown-field scan: each node is read once
// and the problems are capped, so a small spec cannot make a large error.
func TestUnknownFieldsThroughManyAliases(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: a\nx: &a {id: s, prompt: p")
	for i := range 1500 {
		fmt.Fprintf(&b, ", k%d: 1", i)
	}
	b.WriteString("}\nsteps: [")
	for i := range 1500 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("*a")
	}
	b.WriteString("]\n")
	_, err := ParseSpec("w.yaml", []byte(b.String()), nil, DefaultLimits())
	if err == nil || len(err.Error()) > 16<<10 {
		t.Fatalf("a spec of %d bytes: an error of %d bytes, want it bounded", b.Len(), len(fmt.Sprint(err)))
	}
}

// A field's problem is said once, where it is: a field the step's kind
// does not take is refused for that alone (not its value as well), and an
// unknown field inside a block names the block and its fields.
func TestAProblemIsSaidOnceWhereItIs(t *testing.T) {
	wantOneProblem(t, []struct{ name, spec, want string }{
		{"degrade on a code step", "name: w\nsteps:\n  - id: a\n    run: f\n    degrade: text\n",
			`w.yaml:5: steps[0] (a).degrade: is for prompt steps; a code step (run: f) has none`},
		{"max_tokens on a code step", "name: w\nsteps:\n  - id: a\n    run: f\n    max_tokens: -3\n",
			`w.yaml:5: steps[0] (a).max_tokens: is for prompt steps`},
		{"degrade's value", "name: w\nsteps:\n  - id: a\n    route: report\n    prompt: hi\n    degrade: text\n",
			`w.yaml:6: steps[0] (a).degrade: "text" is not a way to degrade (template: `},
		{"unknown field in approve", "name: w\nsteps:\n  - id: a\n    approve: { message: hi, prompt: x }\n",
			`w.yaml:4: unknown field "prompt" in approve (its fields: message, timeout)`},
		{"unknown field in output", "name: w\nsteps:\n  - id: a\n    route: report\n    prompt: hi\n    output: { format: json, shema: {} }\n",
			`unknown field "shema" in output (its fields: format, schema)`},
	})
}

// limitsWith is DefaultLimits changed by f.
func limitsWith(f func(*Limits)) Limits {
	l := DefaultLimits()
	f(&l)
	return l
}

// A limit that is not positive is the caller's mistake, refused with its
// name: not a default, not a spec refused for being over a limit of 0.
func TestLimitsAreTakenAsGiven(t *testing.T) {
	_, err := ParseSpec("w.yaml", []byte("name: w\nsteps: [ { id: a, route: report, prompt: hi } ]\n"), routes, limitsWith(func(l *Limits) { l.MaxTurns = 0 }))
	if err == nil || !strings.Contains(err.Error(), "limits.max_turns is 0") {
		t.Fatalf("a zero max_turns: %v", err)
	}
}
