package spec

import (
	"encoding/json"
	"testing"
)

// Specs that differ by their input only share a shape key; any other
// difference, or an input member nested deeper, makes another.
func TestShapeKeyLeavesTheInputOut(t *testing.T) {
	base := `{"name":"a","input":%s,"defaults":{"route":"r"},"steps":[{"id":"s0","prompt":"x {{ .Input.n }} \"input\":1 {"}]}`
	key := func(in string) (string, string) {
		k, input, ok := ShapeKey([]byte(sprintf(base, in)))
		if !ok {
			t.Fatalf("input %s: not a JSON object", in)
		}
		return k, string(input)
	}
	k1, in1 := key(`{"n":1}`)
	k2, in2 := key(`{"n":[2,{"x":"}"}],"m":"\"]"}`)
	if k1 != k2 || in1 != `{"n":1}` || in2 != `{"n":[2,{"x":"}"}],"m":"\"]"}` {
		t.Fatalf("keys %s %s, inputs %s %s", k1, k2, in1, in2)
	}
	if len(k1) != 24 {
		t.Errorf("key %q", k1)
	}
	for _, other := range []string{
		`{"name":"b","input":{"n":1},"defaults":{"route":"r"},"steps":[{"id":"s0","prompt":"x"}]}`,
		`{"name":"a","defaults":{"route":"r"},"steps":[{"id":"s0","prompt":"x {{ .Input.n }} \"input\":1 {"}]}`,
		`{"name":"a","steps":[{"id":"s0","input":{"n":1}}],"defaults":{"route":"r"}}`,
	} {
		k, input, ok := ShapeKey([]byte(other))
		if !ok || k == k1 {
			t.Errorf("%s: key %s ok %v, the same as another shape's", other, k, ok)
		}
		if other[len(other)-2] == '}' && input != nil {
			t.Errorf("%s: a nested input read as the spec's: %s", other, input)
		}
	}
	for _, bad := range []string{``, `[]`, `{"name":`, `{"a":1,}`, `{"a":"x}`, `{"a":{"b":1}`, `{} x`} {
		if _, _, ok := ShapeKey([]byte(bad)); ok {
			t.Errorf("%q read as a JSON object", bad)
		}
	}
	if k, input, ok := ShapeKey([]byte(` { } `)); !ok || input != nil || k == "" {
		t.Errorf("empty object: %q %q %v", k, input, ok)
	}
}

// The key of a spec as the producer stores it (json.Marshal of a Spec).
func TestShapeKeyOfAMarshaledSpec(t *testing.T) {
	s := Spec{Name: "w", Input: map[string]any{"n": 1}, Defaults: StepDefaults{Route: "r"}, Steps: []Step{{ID: "s0", Prompt: "p"}}}
	a, _ := json.Marshal(s)
	s.Input = map[string]any{"n": 2, "text": "input"}
	b, _ := json.Marshal(s)
	ka, ina, _ := ShapeKey(a)
	kb, inb, _ := ShapeKey(b)
	if ka != kb || string(ina) != `{"n":1}` || string(inb) != `{"n":2,"text":"input"}` {
		t.Fatalf("%s %s %s %s", ka, kb, ina, inb)
	}
}

func sprintf(f, s string) string {
	for i := 0; i+1 < len(f); i++ {
		if f[i] == '%' && f[i+1] == 's' {
			return f[:i] + s + f[i+2:]
		}
	}
	return f
}
