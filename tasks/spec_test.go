package tasks

import (
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
	s, err := ParseSpec("w.yaml", []byte(salesReport), routes, Limits{})
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
	r := s.resolve(rep)
	if r.Route != "report" || r.Timeout.String() != "2m0s" || r.MaxRetries != 8 || r.Queue != "default" {
		t.Errorf("resolved = %+v", r)
	}
	// JSON is accepted too
	js := `{"name":"j","defaults":{"route":"report"},"steps":[{"id":"a","prompt":"hi"}]}`
	if _, err := ParseSpec("w.json", []byte(js), routes, Limits{}); err != nil {
		t.Fatal(err)
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
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseSpec("w.yaml", []byte(c.spec), routes, Limits{})
			if err == nil {
				t.Fatal("accepted")
			}
			lines := problem.Lines(err)
			if len(lines) != 1 {
				t.Fatalf("want one problem, got %q", lines)
			}
			if !strings.Contains(lines[0], c.want) {
				t.Errorf("got %q, want it to contain %q", lines[0], c.want)
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
	_, err := ParseSpec("w.yaml", []byte(b.String()), routes, Limits{MaxSteps: 4})
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
		s, err := ParseSpec("fuzz", data, routes, Limits{})
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
