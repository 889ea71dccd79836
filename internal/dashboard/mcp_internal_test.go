package dashboard

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// The JSON bodies the API decodes (decisionRequest, signalRequest) are
// what openapi.json says they are, field by field and JSON type; the MCP
// tools' arguments are held to openapi.json in turn (internal/mcpserve's
// TestInputSchemasAgreeWithTheOpenAPIDocument), so a field renamed or
// retyped in one is a failing test, not a drift.
func TestRequestBodiesAreTheOpenAPIDocuments(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			RequestBody struct {
				Content map[string]struct {
					Schema struct {
						Properties map[string]struct {
							Type string `json:"type"`
						} `json:"properties"`
					} `json:"schema"`
				} `json:"content"`
			} `json:"requestBody"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	// a raw JSON value is any JSON: OpenAPI gives it no type
	opts := &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{reflect.TypeFor[json.RawMessage](): {}}}
	for _, c := range []struct {
		path string
		s    func() (*jsonschema.Schema, error)
	}{
		{"/api/v1/workflows/{id}/steps/{step}/decision", func() (*jsonschema.Schema, error) { return jsonschema.For[decisionRequest](opts) }},
		{"/api/v1/signals", func() (*jsonschema.Schema, error) { return jsonschema.For[signalRequest](opts) }},
	} {
		s, err := c.s()
		if err != nil {
			t.Fatal(err)
		}
		documented := doc.Paths[c.path]["post"].RequestBody.Content["application/json"].Schema.Properties
		var names []string
		for name, p := range s.Properties {
			names = append(names, name)
			d, ok := documented[name]
			if !ok || d.Type != p.Type {
				t.Errorf("POST %s: the body's %q is %q in Go, %q in openapi.json (documented: %v)", c.path, name, p.Type, d.Type, ok)
			}
		}
		for name := range documented {
			if !slices.Contains(names, name) {
				t.Errorf("POST %s: openapi.json documents %q, which the handler does not decode", c.path, name)
			}
		}
	}
}
