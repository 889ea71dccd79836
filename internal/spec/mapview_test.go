package spec

import (
	"encoding/json"
	"fmt"
	"testing"
)

// A map's outputs as templates read them (.Steps.<map>.JSON): a JSON
// instance's value (nil for a null answer, not the text "null"), a text
// instance's text, nil for a missing one.
func TestMapViewOfKeepsJSONNull(t *testing.T) {
	m := MapViewOf(JSONView("null"), JSONView(`{"n":1}`), StepView{Output: "null"}, StepView{Missing: true})
	want := []any{nil, map[string]any{"n": json.Number("1")}, "null", nil}
	if fmt.Sprintf("%#v", m.Outputs) != fmt.Sprintf("%#v", want) {
		t.Fatalf("outputs %#v, want %#v", m.Outputs, want)
	}
	if m.Output() != `[null,{"n":1},"null",null]` {
		t.Fatalf("output %s", m.Output())
	}
	if len(m.Missing) != 1 || m.Missing[0] != 3 {
		t.Fatalf("missing %v", m.Missing)
	}
}
