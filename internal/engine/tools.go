package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/llmclient"
)

// ToolFunc is a tool a prompt step's model may call (a step whose tools:
// name it). args are the call's arguments, already checked against the
// tool's schema. What it returns goes back to the model: a string as it
// is, anything else as JSON. An error goes back as an error result (the
// model may call again or answer without it), unless it is a
// FatalToolError, which ends the conversation and dead-letters the step.
// A panic is recovered into an error result. ctx ends at the step's
// timeout.
type ToolFunc func(ctx context.Context, args json.RawMessage) (any, error)

// Tool is a tool a worker serves (HandlerOptions.Tools, by name).
type Tool struct {
	// Schema is the JSON Schema of the arguments: an object schema
	// ({"type": "object", …}), self-contained (no $ref outside itself).
	Schema json.RawMessage
	Func   ToolFunc
	// Description tells the model what the tool does; empty: the
	// schema's own description, if it has one.
	Description string
}

// FatalToolError makes a tool's error end the step's conversation: the
// step is dead-lettered (class handler) with err as its reason, instead
// of the model hearing the error. Use it for what no answer of the model
// can fix (a credential that is refused, a resource that is gone).
func FatalToolError(err error) error {
	if err == nil {
		err = errors.New("the tool failed")
	}
	return &fatalToolError{err: err}
}

type fatalToolError struct{ err error }

func (e *fatalToolError) Error() string { return e.err.Error() }
func (e *fatalToolError) Unwrap() error { return e.err }

// CheckTool checks a tool's name, function and schema as NewHandler
// does, and says what is wrong in one line (without the tool's name).
func CheckTool(name string, t Tool) error {
	_, err := compileTool(name, t)
	return err
}

// compiledTool is a registered tool, ready to offer and run.
type compiledTool struct {
	name, description string
	params            map[string]any
	schema            *jsonschema.Schema
	fn                ToolFunc
	mcp               *mcpBinding // an MCP server runs it (fn is nil)
}

func compileTool(name string, t Tool) (*compiledTool, error) {
	if !spec.ValidToolName(name) {
		return nil, errors.New("a tool name is 1 to 64 letters, digits, _ or -")
	}
	if t.Func == nil {
		return nil, errors.New("the function is nil")
	}
	var m map[string]any
	if err := json.Unmarshal(t.Schema, &m); err != nil || m == nil {
		return nil, errors.New("the schema is not a JSON object")
	}
	if typ, _ := m["type"].(string); typ != "object" {
		return nil, errors.New("the schema must be a JSON Schema of type object")
	}
	sch, err := spec.CompileSchema("tool-"+name, m)
	if err != nil {
		return nil, fmt.Errorf("the schema does not compile: %w", err)
	}
	c := &compiledTool{name: name, description: t.Description, params: m, schema: sch, fn: t.Func}
	if c.description == "" {
		c.description, _ = m["description"].(string)
	}
	return c, nil
}

// compileTools compiles a worker's tools; every problem is returned.
func compileTools(tools map[string]Tool) (map[string]*compiledTool, error) {
	names := make([]string, 0, len(tools))
	for n := range tools {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make(map[string]*compiledTool, len(tools))
	var errs []error
	for _, n := range names {
		c, err := compileTool(n, tools[n])
		if err != nil {
			errs = append(errs, fmt.Errorf("tool %q: %w", n, err))
			continue
		}
		out[n] = c
	}
	return out, errors.Join(errs...)
}

// callTool runs a tool, turning a panic into a *PanicError.
func callTool(ctx context.Context, fn ToolFunc, args json.RawMessage) (out any, err error) {
	defer func() {
		if v := recover(); v != nil {
			out, err = nil, &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return fn(ctx, args)
}

// toolContent is a tool's value as the model reads it: a string as it is,
// raw JSON as it is, anything else encoded as JSON.
func toolContent(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.RawMessage:
		return string(x), nil
	case []byte:
		return string(x), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("its result cannot be encoded as JSON: %w", err)
	}
	return string(b), nil
}

// runsTools reports whether the step's tool calls are run by agentq on a
// worker with tools reg: it offers a tool by name alone, or a registered
// one. Otherwise its tools (if any) are passed through.
func runsTools(st *spec.Step, reg map[string]*compiledTool) bool {
	for _, t := range st.Tools {
		if spec.NamedTool(t) || reg[t.Name] != nil {
			return true
		}
	}
	return false
}

// missingTool says which tool the step names alone this worker lacks: one
// that reg lacks, or one of an MCP server mcp lacks (nil: none); nil when
// it lacks none.
func missingTool(st *spec.Step, reg map[string]*compiledTool, mcp MCPServers) error {
	for _, t := range st.Tools {
		if server, _, ok := spec.MCPRef(t.Name); ok {
			if mcp == nil || !mcp.Has(server) {
				return fmt.Errorf("MCP server %q is not configured on this worker (mcp_servers)", server)
			}
			continue
		}
		if spec.NamedTool(t) && reg[t.Name] == nil {
			return fmt.Errorf("tool %q is not registered on this worker", t.Name)
		}
	}
	return nil
}

// toolsRequest is the tools the model is offered: a registered tool with
// its schema and description (the spec's own, when it gives them), any
// other as the spec gives it.
func toolsRequest(st *spec.Step, reg map[string]*compiledTool) []llmclient.Tool {
	var out []llmclient.Tool
	for _, t := range st.Tools {
		lt := llmclient.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters}
		if c := reg[t.Name]; c != nil {
			if lt.Description == "" {
				lt.Description = c.description
			}
			if lt.Parameters == nil {
				lt.Parameters = c.params
			}
		}
		out = append(out, lt)
	}
	return out
}
