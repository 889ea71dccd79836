package spec

import (
	"strings"
	"testing"
)

// A template that reads a field of a JSON step's answer is checked at
// submit against that step's declared schema: a field the schema cannot
// have (a typo) is refused with its line, before anything runs; fields it
// lists, or may have, pass.
func TestTemplateFieldsAreCheckedAgainstTheSchema(t *testing.T) {
	spec := func(schema, read string) string {
		return `name: s
steps:
  - id: plan
    route: solo
    prompt: plan
    output: { format: json, schema: ` + schema + ` }
  - id: use
    route: solo
    depends_on: [plan]
    prompt: "use {{ ` + read + ` }}"
`
	}
	closed := `{ type: object, additionalProperties: false, properties: { cities: { type: array }, meta: { type: object, properties: { n: { type: integer } }, required: [n] } } }`
	listed := `{ type: object, required: [cities], properties: { cities: { type: array } } }`
	open := `{ type: object, properties: { cities: { type: array } }, additionalProperties: true }`
	for _, c := range []struct{ schema, read, want string }{
		{closed, ".Steps.plan.JSON.citiez", `test.yaml:10: steps[1] (use).prompt: reads .Steps.plan.JSON.citiez, which step plan's output.schema cannot have: its top level has no field "citiez" (its fields: cities, meta)`},
		{listed, ".Steps.plan.JSON.citiez", `its top level has no field "citiez" (its fields: cities)`},
		{closed, ".Steps.plan.JSON.meta.m", `meta has no field "m" (its fields: n)`},
		{closed, ".Steps.plan.JSON.cities.x", `cities is of type array, which has no fields`},
		{closed, ".Steps.plan.JSON.cities", ""},
		{closed, ".Steps.plan.JSON.meta.n", ""},
		{open, ".Steps.plan.JSON.citiez", ""},
		{`{ type: object }`, ".Steps.plan.JSON.anything", ""},
	} {
		_, err := ParseSpec("test.yaml", []byte(spec(c.schema, c.read)), nil, DefaultLimits())
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s against %s: refused: %v", c.read, c.schema, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s against %s: %v, want %q", c.read, c.schema, err, c.want)
		}
	}
}
