package engine

import (
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/spec"
)

// Each MCP tool gets a name both dialects take, none another tool of the
// step has; the same tools get the same names in any order.
func TestMCPModelNames(t *testing.T) {
	long := strings.Repeat("t", 70)
	refs := []mcpBinding{
		{server: "crm", tool: "create_note"},
		{server: "crm", tool: "files.read"}, // a dot: not a tool name
		{server: "crm", tool: long},         // too long
		{server: "a", tool: "_b"},           // mcp__a___b
		{server: "crm", tool: "taken"},      // a Go tool of the step has its name
		{server: "fs", tool: "files_read"},
		{server: "fs", tool: "files.read"}, // fits as fs's files_read would
	}
	taken := map[string]bool{"mcp__crm__taken": true}
	names, err := mcpModelNames(refs, taken)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{"mcp__crm__taken": true}
	for _, r := range refs {
		n := names[r]
		if !spec.ValidToolName(n) || seen[n] {
			t.Errorf("%s: name %q (valid %v, used twice %v)", r.ref(), n, spec.ValidToolName(n), seen[n])
		}
		seen[n] = true
	}
	for r, want := range map[mcpBinding]string{refs[0]: "mcp__crm__create_note", refs[3]: "mcp__a___b", refs[5]: "mcp__fs__files_read"} {
		if names[r] != want {
			t.Errorf("%s: %q, want %q", r.ref(), names[r], want)
		}
	}
	for _, r := range []mcpBinding{refs[1], refs[2], refs[4], refs[6]} {
		if n := names[r]; !strings.HasPrefix(n, "mcp__"+r.server+"__") || len(n) > 64 {
			t.Errorf("%s: hashed name %q", r.ref(), n)
		}
	}
	reversed := make([]mcpBinding, len(refs))
	for i, r := range refs {
		reversed[len(refs)-1-i] = r
	}
	again, err := mcpModelNames(reversed, map[string]bool{"mcp__crm__taken": true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range refs {
		if again[r] != names[r] {
			t.Errorf("%s: %q, then %q in another order", r.ref(), names[r], again[r])
		}
	}
}
