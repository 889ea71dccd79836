package spec

import (
	"strings"
	"testing"
)

// A boolean or whole-number field takes YAML's own booleans and whole
// numbers only: "yes" is not true, 1.5 is not 1; each is refused naming
// its field and line.
func TestBooleansAndWholeNumbersAreStrict(t *testing.T) {
	step := "name: x\nsteps:\n  - id: a\n    route: report\n    prompt: hi\n"
	wantOneProblem(t, []struct{ name, spec, want string }{
		{"quoted yes", step + "    stream: \"yes\"\n", `w.yaml:6: steps[0] (a).stream: "yes" is a string, not a boolean (true or false)`},
		{"plain yes", step + "    stream: yes\n", `steps[0] (a).stream: "yes" is a string, not a boolean`},
		{"on", step + "    optional: on\n", `steps[0] (a).optional: "on" is a string, not a boolean`},
		{"a number", step + "    stream: 1\n", `steps[0] (a).stream: 1 is a whole number, not a boolean`},
		{"fraction", step + "    max_tokens: 1.5\n", `w.yaml:6: steps[0] (a).max_tokens: 1.5 is a floating-point number, not a whole number`},
		{"quoted number", step + "    max_tokens: \"100\"\n", `steps[0] (a).max_tokens: "100" is a string, not a whole number`},
		{"retries", step + "    max_retries: 2.0\n", `steps[0] (a).max_retries: 2.0 is a floating-point number, not a whole number`},
		{"defaults", "name: x\ndefaults: { max_retries: \"3\" }\nsteps:\n  - { id: a, route: report, prompt: hi }\n", `defaults.max_retries: "3" is a string, not a whole number`},
		{"concurrency limit", step + "    concurrency: { key: k, limit: 2.5 }\n", `steps[0] (a).concurrency.limit: 2.5 is a floating-point number`},
		{"budget", "name: x\nbudget: { tokens: 1e6 }\nsteps:\n  - { id: a, route: report, prompt: hi }\n", `budget.tokens: 1e6 is a floating-point number, not a whole number`},
		{"through a merge", "name: x\nbase: &b { stream: \"yes\" }\nsteps:\n  - { <<: *b, id: a, route: report, prompt: hi }\n", `not a boolean`},
		{"json", `{"name": "x", "steps": [{"id": "a", "route": "report", "prompt": "hi", "stream": "true"}]}`, `steps[0] (a).stream: "true" is a string, not a boolean`},
	})
	for _, good := range []string{"    stream: true\n    optional: false\n    max_tokens: 100\n    temperature: 1\n",
		"    temperature: 0.5\n    max_retries: 0x10\n", "    stream: True\n    max_tokens: ~\n"} {
		if _, err := ParseSpec("w.yaml", []byte(step+good), routes, DefaultLimits()); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
}

// A problem of a field's type is said once per field, whatever aliases
// repeat it.
func TestStrictScalarsThroughManyAliases(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: x\nbase: &b { stream: \"yes\" }\nsteps:\n")
	for i := range 200 {
		b.WriteString("  - { <<: *b, id: s" + strings.Repeat("x", i%3) + itoa(i) + ", route: report, prompt: hi }\n")
	}
	_, err := ParseSpec("w.yaml", []byte(b.String()), routes, DefaultLimits())
	if err == nil || !strings.Contains(err.Error(), "not a boolean") || strings.Count(err.Error(), "\n") > maxProblems {
		t.Fatalf("got %v", err)
	}
}

func itoa(i int) string {
	const d = "0123456789"
	if i < 10 {
		return d[i : i+1]
	}
	return itoa(i/10) + d[i%10:i%10+1]
}
