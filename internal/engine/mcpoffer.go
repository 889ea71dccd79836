package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// mcpRefused is a step's MCP tool that cannot be offered: a tool the
// server does not list, or whose schema is not one (class bad_request:
// not retried).
type mcpRefused struct{ msg string }

func (e *mcpRefused) Error() string      { return e.msg }
func (e *mcpRefused) Class() retry.Class { return retry.BadRequest }

// offer is what the step's tools are on this worker: the registered
// tools it names, and the tools of the MCP servers it names, each under
// the name the model calls it by; and the tools of the request, in the
// step's order (a server's in the order it lists them).
func (h *Handler) offer(ctx context.Context, st *spec.Step, log *slog.Logger) ([]llmclient.Tool, map[string]*compiledTool, error) {
	offered := make(map[string]*compiledTool)
	taken := make(map[string]bool)
	for _, t := range st.Tools {
		if _, _, ok := spec.MCPRef(t.Name); ok {
			continue
		}
		taken[t.Name] = true
		if c := h.tools[t.Name]; c != nil {
			offered[t.Name] = c
		}
	}
	// each mcp: entry's tools, listed once per server
	type entry struct {
		tools []MCPTool
		at    int // the step's tool this entry is
	}
	listed := map[string][]MCPTool{}
	var entries []entry
	var bindings []mcpBinding
	seen := map[mcpBinding]bool{}
	for i, t := range st.Tools {
		server, tool, ok := spec.MCPRef(t.Name)
		if !ok {
			continue
		}
		if h.o.MCP == nil || !h.o.MCP.Has(server) {
			return nil, nil, fmt.Errorf("MCP server %q is not configured on this worker", server)
		}
		all, ok := listed[server]
		if !ok {
			var err error
			if all, err = h.o.MCP.Tools(ctx, server); err != nil {
				return nil, nil, fmt.Errorf("MCP server %s: list its tools: %w", server, err)
			}
			listed[server] = all
		}
		e := entry{at: i}
		for _, mt := range all {
			if tool != "" && mt.Name != tool {
				continue
			}
			if _, err := h.mcpSchemas.compile(server, mt); err != nil {
				if tool != "" {
					return nil, nil, &mcpRefused{fmt.Sprintf("tool %s: the server's input schema %v", t.Name, err)}
				}
				log.Warn("MCP tool not offered: its input schema is not one", "server", server, "tool", mt.Name, "err", err.Error())
				continue
			}
			b := mcpBinding{server: server, tool: mt.Name, sideEffects: h.o.MCP.SideEffects(server, mt.Name)}
			if !seen[b] {
				seen[b] = true
				e.tools = append(e.tools, mt)
				bindings = append(bindings, b)
			}
		}
		if tool != "" && len(e.tools) == 0 && !seen[mcpBinding{server: server, tool: tool, sideEffects: h.o.MCP.SideEffects(server, tool)}] {
			names := make([]string, len(all))
			for j, mt := range all {
				names[j] = mt.Name
			}
			return nil, nil, &mcpRefused{fmt.Sprintf("tool %s: the server lists no tool %q (it lists %s)", t.Name, tool, spec.OneLine(excerptList(names)))}
		}
		entries = append(entries, e)
	}
	names, err := mcpModelNames(bindings, taken)
	if err != nil {
		return nil, nil, &mcpRefused{err.Error()}
	}
	var req []llmclient.Tool
	next := 0
	for i, t := range st.Tools {
		if next < len(entries) && entries[next].at == i {
			server, _, _ := spec.MCPRef(t.Name)
			for _, mt := range entries[next].tools {
				b := mcpBinding{server: server, tool: mt.Name, sideEffects: h.o.MCP.SideEffects(server, mt.Name)}
				sch, _ := h.mcpSchemas.compile(server, mt)
				c := &compiledTool{name: names[b], description: mt.Description, params: sch.params, schema: sch.schema, mcp: &b}
				offered[c.name] = c
				req = append(req, llmclient.Tool{Name: c.name, Description: c.description, Parameters: c.params})
			}
			next++
			continue
		}
		req = append(req, toolsRequest(&spec.Step{Tools: []spec.ToolSpec{t}}, h.tools)...)
	}
	return req, offered, nil
}

// excerptList is names, comma-separated, the first 20.
func excerptList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	if len(names) > 20 {
		return strings.Join(names[:20], ", ") + fmt.Sprintf(", … (%d in all)", len(names))
	}
	return strings.Join(names, ", ")
}

// mcpSchemas keeps the MCP tools' input schemas compiled, by server, tool
// and schema text: a server's list is read at every attempt, compiled
// once. It holds at most mcpSchemaEntries; past that it starts over.
type mcpSchemas struct {
	mu sync.Mutex
	m  map[string]*mcpSchema
}

const mcpSchemaEntries = 4096

type mcpSchema struct {
	params map[string]any
	schema *jsonschema.Schema
	err    error
}

// compile returns t's schema compiled, or why it is not a tool's schema.
func (c *mcpSchemas) compile(server string, t MCPTool) (*mcpSchema, error) {
	key := server + "\x00" + t.Name + "\x00" + string(t.InputSchema)
	c.mu.Lock()
	s, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return s, s.err
	}
	s = &mcpSchema{}
	var m map[string]any
	switch err := json.Unmarshal(t.InputSchema, &m); {
	case err != nil || m == nil:
		s.err = errors.New("is not a JSON object")
	case m["type"] != "object":
		s.err = errors.New(`is not of type "object"`)
	default:
		s.params = m
		if s.schema, err = spec.CompileSchema("mcp-"+server+"-"+t.Name, m); err != nil {
			s.err = fmt.Errorf("does not compile: %s", spec.OneLine(err.Error()))
		}
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= mcpSchemaEntries {
		c.m = map[string]*mcpSchema{}
	}
	c.m[key] = s
	c.mu.Unlock()
	return s, s.err
}
