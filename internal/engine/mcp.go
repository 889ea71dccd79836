package engine

import (
	"context"
	"encoding/json"
)

// MCPServers are the MCP servers a worker takes tools from
// (HandlerOptions.MCP; internal/mcptool implements it over the official
// SDK). A prompt step offers a whole server's tools (tools: [mcp:NAME]) or
// one of them (mcp:NAME/TOOL).
//
// Errors carry their class (retry.ClassOf): a server that cannot be
// started or reached is network (the step is retried), a call that took
// longer than the server's timeout is timeout, a protocol error or a
// server's answer that breaks MCP's rules is bad_request (not retried).
type MCPServers interface {
	// Has reports whether the worker has a server of that name.
	Has(server string) bool
	// Tools lists the server's tools (tools/list, kept until the server
	// says its list changed or it restarts), starting it or reaching it
	// if need be.
	Tools(ctx context.Context, server string) ([]MCPTool, error)
	// Call calls a tool with args (a JSON object). started, when not nil,
	// is called right before the call is sent to a server that is up, with
	// the call's context (its deadline the server's timeout): an error
	// from it stops the call, which is then not sent. A call whose started
	// returned nil may have taken effect whatever Call returns.
	Call(ctx context.Context, server, tool string, args json.RawMessage, started func(ctx context.Context) error) (MCPResult, error)
	// SideEffects reports whether the tool must not run twice
	// (mcp_servers.NAME.side_effects).
	SideEffects(server, tool string) bool
}

// MCPTool is a tool an MCP server lists.
type MCPTool struct {
	Name        string
	Description string
	// InputSchema is its arguments' JSON Schema, as the server sent it.
	InputSchema json.RawMessage
}

// MCPResult is what a tool call answered, as the model reads it.
type MCPResult struct {
	// Content is the result's text (its text parts; other parts described
	// in a line each; the structured content as JSON when there is no
	// text).
	Content string
	// IsError is the tool's own failure (the result's isError): it goes
	// back to the model as an error result.
	IsError bool
}

// mcpBinding is what a compiled tool that an MCP server runs calls.
type mcpBinding struct {
	server, tool string
	sideEffects  bool
}

// ref is the tool as a spec names it: mcp:SERVER/TOOL.
func (b *mcpBinding) ref() string { return "mcp:" + b.server + "/" + b.tool }
