package spec

import "testing"

const codeSpec = `name: code
input: { regions: [north, south] }
steps:
  - id: plan
    route: report
    prompt: "plan for {{ .Input.regions }}"
  - id: per_region
    depends_on: [plan]
    run: run_sql
    with: { regions: "{{ .Input.regions }}", plan: "{{ .Steps.plan.Output }}", limit: 10 }
`

func TestCodeStepSpecs(t *testing.T) {
	s, err := ParseSpec("w.yaml", []byte(codeSpec), routes, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	st, _ := s.Step("per_region")
	if st.Run != "run_sql" || len(st.withT) != 2 || !st.withT["with.regions"].value || !st.withT["with.plan"].value || !WantsJSON(st) {
		t.Fatalf("code step parsed as %+v (with templates %v)", st, st.withT)
	}
	needs := s.Needs()
	if len(needs) != 2 || needs[1] != (Need{Step: "per_region", Kind: "handler", Name: "run_sql", Queue: "default"}) {
		t.Errorf("needs %+v", needs)
	}
}

func TestCodeStepSpecErrors(t *testing.T) {
	cases := []struct{ name, spec, want string }{
		{"prompt and run", codeSpec + "    prompt: hi\n", `steps[1] (per_region).prompt: is for prompt steps; a code step (run: run_sql) has none`},
		{"with on a prompt step", "name: x\nsteps:\n  - { id: a, route: report, prompt: hi, with: {x: 1} }\n", `steps[0] (a).with: is for code steps (run:); a prompt step without tools has none`},
		{"with reads a step it does not depend on", "name: x\nsteps:\n  - { id: a, route: report, prompt: hi }\n  - { id: b, run: f, with: { x: \"{{ .Steps.a.Output }}\" } }\n", `steps[1] (b).with: refers to .Steps.a, which is not a step it depends on`},
		{"with has a bad template", "name: x\nsteps:\n  - { id: b, run: f, with: { x: \"{{ .Input.x \" } }\n", `steps[0] (b).with: template:`},
		{"run is not a name", "name: x\nsteps:\n  - { id: b, run: \"9 lives\" }\n", `steps[0] (b).run: "9 lives" is not a function name`},
	}
	wantOneProblem(t, cases)
}
