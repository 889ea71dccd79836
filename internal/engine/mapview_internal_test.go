package engine

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/agentq/agentq/internal/spec"
)

// A map's outputs as templates read them (.Steps.<map>.JSON): a JSON
// instance's value (nil for a null answer, not the text "null"), a text
// instance's text, nil for a missing one.
func TestMapViewOfKeepsJSONNull(t *testing.T) {
	m := spec.MapViewOf(spec.JSONView("null"), spec.JSONView(`{"n":1}`), spec.StepView{Output: "null"}, spec.StepView{Missing: true})
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
