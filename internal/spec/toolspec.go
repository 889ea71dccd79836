package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// ToolSpec is a tool a prompt step offers the model. In a spec it is
// either a name alone (tools: [fetch_figure]), which must be a tool
// registered on the worker that runs the step (its schema and description
// are sent to the model), or a mapping of name, description and
// parameters (a JSON Schema of type object). A mapping whose name is a
// registered tool runs that tool too (its own description and parameters,
// when given, are what the model sees; the arguments are checked against
// the registered schema); one whose name is not registered is passed
// through: the model's calls are kept with the step's output, not run.
type ToolSpec struct {
	Name        string         `yaml:"name" json:"name"`
	Description string         `yaml:"description" json:"description,omitempty"`
	Parameters  map[string]any `yaml:"parameters" json:"parameters,omitempty"`

	named bool // given by name alone: the worker must have it
}

// DefaultMaxTurns is a step's max_turns when it sets none (capped at the
// limit on it, limits.max_turns).
const DefaultMaxTurns = 8

// toolName is what a tool's name may be, as the providers take it.
var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ValidToolName reports whether name may be a tool's name.
func ValidToolName(name string) bool { return toolName.MatchString(name) }

// toolSpecFields are the keys a tool's mapping may hold.
var toolSpecFields = map[string]bool{"name": true, "description": true, "parameters": true}

// toolSpecMap is the plain shape of a tool's mapping.
type toolSpecMap struct {
	Name        string         `yaml:"name" json:"name"`
	Description string         `yaml:"description" json:"description,omitempty"`
	Parameters  map[string]any `yaml:"parameters" json:"parameters,omitempty"`
}

// UnmarshalYAML reads a tool's name alone or its mapping.
func (t *ToolSpec) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*t = ToolSpec{Name: n.Value, named: true}
		return nil
	case yaml.MappingNode:
		var errs []string
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; !toolSpecFields[k.Value] {
				errs = append(errs, fmt.Sprintf("line %d: unknown field %q in a tool (name, description, parameters)", k.Line, k.Value))
			}
		}
		if len(errs) > 0 {
			return &yaml.TypeError{Errors: errs}
		}
		var m toolSpecMap
		if err := n.Decode(&m); err != nil {
			return err
		}
		*t = ToolSpec{Name: m.Name, Description: m.Description, Parameters: m.Parameters}
		return nil
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: a tool is a name or a mapping of name, description and parameters", n.Line)}}
}

// MarshalYAML writes a tool given by name as its name.
func (t ToolSpec) MarshalYAML() (any, error) {
	if t.named {
		return t.Name, nil
	}
	return toolSpecMap{Name: t.Name, Description: t.Description, Parameters: t.Parameters}, nil
}

// MarshalJSON writes a tool given by name as its name, so the stored spec
// keeps the form the user wrote.
func (t ToolSpec) MarshalJSON() ([]byte, error) {
	if t.named {
		return json.Marshal(t.Name)
	}
	return json.Marshal(toolSpecMap{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (t *ToolSpec) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err == nil {
		*t = ToolSpec{Name: name, named: true}
		return nil
	}
	var m toolSpecMap
	if err := json.Unmarshal(b, &m); err != nil {
		return errors.New("a tool is a name or an object of name, description and parameters")
	}
	*t = ToolSpec{Name: m.Name, Description: m.Description, Parameters: m.Parameters}
	return nil
}

// checkTools validates a step's tools: field.
func (s *Spec) checkTools(st *Step, where string, bad ProblemFunc) {
	seen := map[string]bool{}
	for j, t := range st.Tools {
		w := fmt.Sprintf("%s.tools[%d]", where, j)
		_, _, mcp := MCPRef(t.Name)
		switch {
		case strings.HasPrefix(t.Name, MCPPrefix) && !mcp:
			bad(st.line, w+".name", "%q is not an MCP server's tools (mcp:SERVER or mcp:SERVER/TOOL; a server's name is 1 to 32 letters, digits, - or single _)", t.Name)
		case mcp && !t.named:
			bad(st.line, w, "%s is given by name alone (its description and parameters come from the server)", t.Name)
		case !mcp && !ValidToolName(t.Name):
			bad(st.line, w+".name", "%q is not a tool name (1 to 64 letters, digits, _ or -)", t.Name)
		case seen[t.Name]:
			bad(st.line, w+".name", "%q is listed twice", t.Name)
		}
		seen[t.Name] = true
		if t.Parameters == nil {
			continue
		}
		m, err := jsonValue(t.Parameters)
		if err != nil {
			bad(st.line, w+".parameters", "%v", err)
			continue
		}
		if typ, _ := m["type"].(string); typ != "object" {
			bad(st.line, w+".parameters", "must be a JSON Schema of type object")
			continue
		}
		if _, err := CompileSchema(st.ID+"-tool-"+t.Name, m); err != nil {
			bad(st.line, w+".parameters", "does not compile: %v", err)
			continue
		}
		st.Tools[j].Parameters = m
	}
}

// checkMaxTurns checks a tool loop's max_turns, and caps its default at
// the producer's limit (workers do not know the limit).
func checkMaxTurns(st *Step, where string, lim Limits, bad ProblemFunc) {
	w := where + ".max_turns"
	switch {
	case st.MaxTurns == 0:
		if lim.MaxTurns < DefaultMaxTurns {
			st.MaxTurns = lim.MaxTurns
		}
	case st.MaxTurns < 1:
		bad(st.line, w, "%d is under 1", st.MaxTurns)
	case st.MaxTurns > lim.MaxTurns:
		bad(st.line, w, "%d is over the limit of %d (limits.max_turns)", st.MaxTurns, lim.MaxTurns)
	}
}

// MaxTurns is the most model calls the step's tool conversation may make.
func MaxTurns(st *Step) int {
	if st.MaxTurns > 0 {
		return st.MaxTurns
	}
	return DefaultMaxTurns
}

// toolLoopKind is a prompt step that offers tools (tools:): the worker
// runs the model–tool loop when one of them is its own (registered, or a
// named one); tools only passed through make it one call, as a prompt
// step's.
type toolLoopKind struct{ promptKind }

func (toolLoopKind) Name() string { return KindTools }

func (toolLoopKind) Claims(st *Step) bool { return len(st.Tools) > 0 }

func (toolLoopKind) Takes(*Step) ([]string, string) {
	return append(promptFields[:len(promptFields):len(promptFields)], "tools", "max_turns"), "a step with tools"
}

func (toolLoopKind) Check(s *Spec, st *Step, where string, lim Limits, bad ProblemFunc) {
	checkPrompt(s, st, where, bad)
	checkMaxTurns(st, where, lim, bad)
}

// NamedTool reports whether t offers a tool by its name alone (a worker's
// registered or built-in tool gives its schema).
func NamedTool(t ToolSpec) bool { return t.named }
