package mcpserve_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentq/agentq/internal/mcpserve"
)

// mirrors says which JSON API operation each tool is: the tool's
// arguments are the operation's parameters and body fields, by name
// (a header's in snake case) and JSON type. mcpOnly are arguments the
// operation lacks; implied are its fields the tool's name decides.
var mirrors = []struct {
	tool, method, path string
	mcpOnly, implied   []string
}{
	{mcpserve.ToolSubmit, "post", "/api/v1/workflows", []string{"wait", "wait_seconds"}, nil},
	{mcpserve.ToolStatus, "get", "/api/v1/workflows/{id}", nil, nil},
	{mcpserve.ToolResult, "get", "/api/v1/workflows/{id}/result", nil, nil},
	{mcpserve.ToolList, "get", "/api/v1/workflows", nil, nil},
	{mcpserve.ToolApprove, "post", "/api/v1/workflows/{id}/steps/{step}/decision", nil, []string{"approve"}},
	{mcpserve.ToolReject, "post", "/api/v1/workflows/{id}/steps/{step}/decision", nil, []string{"approve"}},
	{mcpserve.ToolSignal, "post", "/api/v1/signals", nil, nil},
	{mcpserve.ToolCancel, "post", "/api/v1/workflows/{id}/cancel", nil, nil},
}

// field is one argument: its JSON type and whether it is required.
type field struct {
	Type     string
	Required bool
}

// jsonSchema is the part of a JSON Schema (or an OpenAPI schema) compared.
type jsonSchema struct {
	Type       any                   `json:"type"`
	Enum       []any                 `json:"enum"`
	Items      *jsonSchema           `json:"items"`
	Properties map[string]jsonSchema `json:"properties"`
	Required   []string              `json:"required"`
}

// kind is a schema's JSON type: "null" dropped from a list of types, a
// query parameter's true/false enum a boolean, no type "any", an array
// with its items' kind.
func (s jsonSchema) kind() string {
	var types []string
	switch t := s.Type.(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			if x != "null" {
				types = append(types, x.(string))
			}
		}
	}
	switch {
	case len(types) == 1 && types[0] == "array" && s.Items != nil:
		return "array<" + s.Items.kind() + ">"
	case len(types) == 1:
		return types[0]
	case len(types) == 0 && len(s.Enum) == 2 && slices.Contains(s.Enum, any("true")) && slices.Contains(s.Enum, any("false")):
		return "boolean"
	case len(types) == 0 && len(s.Enum) == 0:
		return "any"
	}
	return strings.Join(types, "|")
}

// operationFields are an OpenAPI operation's parameters and body fields;
// a body that is a whole document (YAML text, or a JSON object of no
// properties named) is the field spec.
func operationFields(t *testing.T, op map[string]json.RawMessage) map[string]field {
	t.Helper()
	out := map[string]field{}
	var params []struct {
		Name     string     `json:"name"`
		In       string     `json:"in"`
		Required bool       `json:"required"`
		Schema   jsonSchema `json:"schema"`
	}
	if raw, ok := op["parameters"]; ok {
		if err := json.Unmarshal(raw, &params); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range params {
		name := p.Name
		if p.In == "header" {
			name = strings.ReplaceAll(strings.ToLower(name), "-", "_")
		}
		out[name] = field{p.Schema.kind(), p.Required || p.In == "path"}
	}
	if raw, ok := op["requestBody"]; ok {
		var body struct {
			Required bool                                   `json:"required"`
			Content  map[string]struct{ Schema jsonSchema } `json:"content"`
		}
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatal(err)
		}
		js, hasJSON := body.Content["application/json"]
		switch {
		case hasJSON && len(js.Schema.Properties) > 0:
			for name, s := range js.Schema.Properties {
				out[name] = field{s.kind(), slices.Contains(js.Schema.Required, name)}
			}
		case body.Content["application/yaml"].Schema.kind() == "string":
			out["spec"] = field{"string", body.Required}
		default:
			t.Fatalf("a request body of no fields and no YAML: %s", raw)
		}
	}
	return out
}

func toolFields(s jsonSchema) map[string]field {
	out := map[string]field{}
	for name, p := range s.Properties {
		out[name] = field{p.kind(), slices.Contains(s.Required, name)}
	}
	return out
}

// listTools lists a server's tools through a client, as JSON.
func listTools(t *testing.T, o mcpserve.Options) map[string]*mcp.Tool {
	t.Helper()
	srv, err := mcpserve.New(nil, o)
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, srv)
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		out[tool.Name] = tool
	}
	return out
}

// connect connects an SDK client to srv in memory.
func connect(t *testing.T, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait(); cancel() })
	return cs
}

// Each tool's input schema (as a client lists it) and the JSON API
// operation it mirrors (openapi.json, which a dashboard test holds to the
// routes) name the same arguments, of the same JSON types, required
// alike: neither can change without the other.
func TestInputSchemasAgreeWithTheOpenAPIDocument(t *testing.T) {
	b, err := os.ReadFile("../dashboard/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	tools := listTools(t, mcpserve.Options{})
	if len(tools) != len(mirrors) {
		t.Errorf("%d tools listed, %d mirrored", len(tools), len(mirrors))
	}
	for _, m := range mirrors {
		tool, ok := tools[m.tool]
		if !ok {
			t.Errorf("tool %s is not listed", m.tool)
			continue
		}
		raw, _ := json.Marshal(tool.InputSchema)
		var s jsonSchema
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		mcpFields := toolFields(s)
		op, ok := doc.Paths[m.path][m.method]
		if !ok {
			t.Errorf("%s: openapi.json has no %s %s", m.tool, m.method, m.path)
			continue
		}
		restFields := operationFields(t, op)
		var names []string
		for n := range mcpFields {
			names = append(names, n)
		}
		for n := range restFields {
			if _, ok := mcpFields[n]; !ok {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		for _, n := range names {
			mf, inMCP := mcpFields[n]
			rf, inREST := restFields[n]
			switch {
			case slices.Contains(m.mcpOnly, n):
				if !inMCP || inREST {
					t.Errorf("%s: %q is listed as MCP-only: in the tool %v, in the API %v", m.tool, n, inMCP, inREST)
				}
			case slices.Contains(m.implied, n):
				if inMCP || !inREST {
					t.Errorf("%s: %q is listed as implied by the tool: in the tool %v, in the API %v", m.tool, n, inMCP, inREST)
				}
			case !inMCP:
				t.Errorf("%s: the API's %s %s takes %q (%s), the tool does not", m.tool, strings.ToUpper(m.method), m.path, n, rf.Type)
			case !inREST:
				t.Errorf("%s: the tool takes %q (%s), the API's %s %s does not", m.tool, n, mf.Type, strings.ToUpper(m.method), m.path)
			case mf != rf:
				t.Errorf("%s: %q is %+v in the tool, %+v in the API", m.tool, n, mf, rf)
			}
		}
		if tool.Description == "" || tool.Annotations == nil {
			t.Errorf("%s: no description or annotations", m.tool)
		}
	}
}

// A read-only server lists the read tools only.
func TestReadOnlyListsTheReadTools(t *testing.T) {
	var names []string
	for n, tool := range listTools(t, mcpserve.Options{ReadOnly: true}) {
		names = append(names, n)
		if !tool.Annotations.ReadOnlyHint {
			t.Errorf("%s is listed read-only but not marked so", n)
		}
	}
	sort.Strings(names)
	if want := []string{mcpserve.ToolList, mcpserve.ToolResult, mcpserve.ToolStatus}; !slices.Equal(names, want) {
		t.Fatalf("read-only tools %v, want %v", names, want)
	}
}
