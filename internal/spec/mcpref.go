package spec

import (
	"regexp"
	"strings"
)

// MCPPrefix starts a step's tool that comes from an MCP server of the
// worker's configuration (mcp_servers): mcp:NAME offers every tool of
// server NAME, mcp:NAME/TOOL one of them. Such a tool is given by name
// alone.
const MCPPrefix = "mcp:"

var (
	// mcpServer is a server's name as the configuration takes it.
	mcpServer = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9-]|_[a-zA-Z0-9-]){0,31}$`)
	// mcpTool is a tool's name as MCP recommends it, and a slash.
	mcpTool = regexp.MustCompile(`^[a-zA-Z0-9_./-]{1,128}$`)
)

// MCPRef reads a tool name that names an MCP server's tools: mcp:NAME
// (tool is empty) or mcp:NAME/TOOL. ok is false for any other name, and
// for a malformed one (valid says which).
func MCPRef(name string) (server, tool string, ok bool) {
	rest, found := strings.CutPrefix(name, MCPPrefix)
	if !found {
		return "", "", false
	}
	server, tool, slash := strings.Cut(rest, "/")
	if len(server) > 32 || !mcpServer.MatchString(server) || slash && !mcpTool.MatchString(tool) {
		return "", "", false
	}
	return server, tool, true
}

// MCPServerOf is the tool name a worker serving server NAME advertises
// (mcp:NAME): what a step's mcp:NAME/TOOL needs of the fleet too.
func MCPServerOf(name string) (string, bool) {
	server, _, ok := MCPRef(name)
	if !ok {
		return "", false
	}
	return MCPPrefix + server, true
}
