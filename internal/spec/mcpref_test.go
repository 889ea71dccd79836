package spec

import (
	"os"
	"strings"
	"testing"
)

// A step offers a whole MCP server (mcp:NAME) or one of its tools
// (mcp:NAME/TOOL) by name, beside a Go tool; what it needs of the fleet is
// a worker serving mcp:NAME either way.
func TestMCPToolsByName(t *testing.T) {
	src := strings.Replace(toolsSpec, "      - fetch_figure\n", "      - fetch_figure\n      - mcp:everything\n      - mcp:crm_prod/get-sum\n      - mcp:files/fs.read\n", 1)
	s, err := ParseSpec("w.yaml", []byte(src), routes, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	st, _ := s.Step("a")
	if len(st.Tools) != 5 || !NamedTool(st.Tools[1]) || st.Tools[2].Name != "mcp:crm_prod/get-sum" {
		t.Fatalf("tools %+v", st.Tools)
	}
	var needs []string
	for _, n := range s.Needs() {
		if n.Kind == "tool" {
			needs = append(needs, n.Name)
		}
	}
	if got := strings.Join(needs, " "); got != "fetch_figure mcp:everything mcp:crm_prod mcp:files weather" {
		t.Errorf("tool needs %q", got)
	}
	for name, want := range map[string][2]string{"mcp:a": {"a", ""}, "mcp:a-b_c/x.y/z": {"a-b_c", "x.y/z"}} {
		if server, tool, ok := MCPRef(name); !ok || server != want[0] || tool != want[1] {
			t.Errorf("MCPRef(%q) = %q, %q, %v", name, server, tool, ok)
		}
	}
}

// A malformed reference, and one given as a mapping, are refused naming
// the field.
func TestMCPToolsRefused(t *testing.T) {
	for tool, want := range map[string]string{
		`"mcp:"`:                                `steps[0] (a).tools[0].name: "mcp:" is not an MCP server's tools`,
		"mcp:a__b":                              `"mcp:a__b" is not an MCP server's tools`,
		"mcp:a/":                                `"mcp:a/" is not an MCP server's tools`,
		"mcp:a/b c":                             `"mcp:a/b c" is not an MCP server's tools`,
		"mcp:" + strings.Repeat("a", 33):        "is not an MCP server's tools",
		"{ name: \"mcp:a/b\", description: d }": "steps[0] (a).tools[0]: mcp:a/b is given by name alone",
	} {
		src := strings.Replace(toolsSpec, "      - fetch_figure\n      - { name: weather, description: Weather now, parameters: { type: object } }\n", "      - "+tool+"\n", 1)
		_, err := ParseSpec("w.yaml", []byte(src), routes, DefaultLimits())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("tools: [%s]: error %v, want %q", tool, err, want)
		}
	}
}

// docs/mcp.md's spec (its second YAML block) parses, offering a server's
// tool, a whole server and a Go tool.
func TestMCPDocSpecParses(t *testing.T) {
	doc, err := os.ReadFile("../../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## Configure the servers\n")
	if !ok {
		t.Fatal("docs/mcp.md has no section \"Configure the servers\"")
	}
	blocks := strings.Split(section, "```yaml\n")
	if len(blocks) < 3 {
		t.Fatal("docs/mcp.md has fewer than two YAML blocks from \"Configure the servers\"")
	}
	src, _, _ := strings.Cut(blocks[2], "```")
	s, err := ParseSpec("mcp.md", []byte(src), map[string]bool{"report": true}, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	st, _ := s.Step("answer")
	if len(st.Tools) != 3 || st.Tools[0].Name != "mcp:everything/get-sum" || st.Tools[1].Name != "mcp:crm" {
		t.Errorf("tools %+v", st.Tools)
	}
}
