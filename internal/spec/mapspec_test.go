package spec

import (
	"strings"
	"testing"
)

const mapSpecText = `name: regions
steps:
  - id: plan
    route: report
    prompt: "List the regions"
    output: { format: json }
  - id: per_region
    depends_on: [plan]
    for_each: "{{ .Steps.plan.JSON.regions }}"
    max_parallel: 20
    route: report
    prompt: "Region {{ .Index }}: {{ .Item }}"
  - id: report
    depends_on: [per_region]
    route: report
    prompt: "{{ range .Steps.per_region.Outputs }}{{ . }} {{ end }}{{ range $.Steps.per_region.Missing }}{{ . }}{{ end }}"
`

func TestMapSpecParsesAndItsInstancesReadOnlyWhatTheirTemplatesName(t *testing.T) {
	s, err := ParseSpec("m.yaml", []byte(mapSpecText), routes, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	m, _ := s.Step("per_region")
	if !m.IsMap() || MaxParallel(m) != 20 || MaxItems(m) != DefaultMaxItems {
		t.Fatalf("map step %+v", m)
	}
	if strings.Join(m.inputs, ",") != "plan" || len(m.itemInputs) != 0 {
		t.Errorf("inputs %v, instance inputs %v: the instance reads no step", m.inputs, m.itemInputs)
	}
	st, inst, ok := StepOf(s, "per_region[12]")
	if !ok || st != m || inst.Index != 12 {
		t.Errorf("StepOf(per_region[12]) = %v %v %v", st, inst, ok)
	}
	for _, bad := range []string{"per_region[-1]", "per_region[01]", "per_region[1000]", "plan[0]", "per_region[x]", "per_region[1"} {
		if _, _, ok := StepOf(s, bad); ok {
			t.Errorf("StepOf(%q) found a step", bad)
		}
	}
}

func TestMapSpecProblems(t *testing.T) {
	cases := []struct{ name, from, to, want string }{
		{"item outside a map", `prompt: "List the regions"`, `prompt: "List {{ .Item }}"`,
			`m.yaml:5: steps[0] (plan).prompt: reads .Item or .Index, which only a map step's (for_each) prompt, system and with: have`},
		{"item in for_each", `for_each: "{{ .Steps.plan.JSON.regions }}"`, `for_each: "{{ .Item }}"`,
			`m.yaml:9: steps[1] (per_region).for_each: reads .Item or .Index`},
		{"for_each not a template", `for_each: "{{ .Steps.plan.JSON.regions }}"`, `for_each: "regions"`,
			`m.yaml:9: steps[1] (per_region).for_each: "regions" is not a template`},
		{"for_each reads a stranger", `for_each: "{{ .Steps.plan.JSON.regions }}"`, `for_each: "{{ .Steps.report.JSON }}"`,
			`steps[1] (per_region).for_each: refers to .Steps.report, which is not a step it depends on`},
		{"outputs of a plain step", `{{ range .Steps.per_region.Outputs }}`, `{{ range .Steps.plan.Outputs }}`,
			`steps[2] (report).prompt: reads .Steps.plan.Outputs, but step plan is not a map step (for_each)`},
		{"max_items over the cap", `max_parallel: 20`, `max_items: 20000`,
			`m.yaml:10: steps[1] (per_region).max_items: 20000 is over limits.max_map_items (10000)`},
		{"max_parallel on a plain step", `output: { format: json }`, "output: { format: json }\n    max_parallel: 3",
			`steps[0] (plan).max_parallel: is only for map steps (for_each)`},
		{"negative max_parallel", `max_parallel: 20`, `max_parallel: -2`, `steps[1] (per_region).max_parallel: is negative`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := strings.Replace(mapSpecText, c.from, c.to, 1)
			if text == mapSpecText {
				t.Fatalf("%q not in the spec", c.from)
			}
			_, err := ParseSpec("m.yaml", []byte(text), routes, DefaultLimits())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v\nwant %q", err, c.want)
			}
		})
	}
}

// Inside range and with, dot is the element: its fields are the data's,
// not the top level's; $ reaches the top level from anywhere.
func TestRangeBodiesReadTheirElement(t *testing.T) {
	refs, err := templateRefs("t", `{{ range .Input.rows }}{{ .name }}{{ $.Steps.a.Output }}{{ end }}{{ with .Input.x }}{{ .y }}{{ end }}`)
	if err != nil || len(refs) != 1 || refs[0].step != "a" {
		t.Fatalf("refs %v, %v", refs, err)
	}
	if _, err := templateRefs("t", `{{ range .Input.rows }}{{ $.Bogus }}{{ end }}`); err == nil {
		t.Fatal("$.Bogus accepted")
	}
}
