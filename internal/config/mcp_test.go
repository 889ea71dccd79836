package config_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentq/agentq/internal/config"
)

const mcpServers = `
mcp_servers:
  everything:
    command: npx -y @modelcontextprotocol/server-everything
    env: { API_TOKEN: "${MCP_TOKEN}" }
    side_effects: all
  files:
    command: ["/usr/local/bin/files-mcp", "--root", "/data/my files"]
    timeout: 5s
    concurrency: 2
    side_effects: [write_file, delete_file]
  crm:
    url: https://mcp.example.com/mcp
    headers: { Authorization: "Bearer ${file:SECRET_FILE}" }
`

// Both forms of a command, env and headers expanded like provider keys,
// the defaults filled in, side effects as a list or all; the env and
// header values are secrets: in Secrets(), never printed or marshaled.
func TestMCPServersConfig(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "crm")
	if err := os.WriteFile(secretFile, []byte("crm-token-7c1a9e\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"OA_KEY": "k", "AN_KEY": "k", "MCP_TOKEN": "mcp-token-55f2b0"}
	c, err := config.Load(config.Input{Path: write(t, good+strings.ReplaceAll(mcpServers, "SECRET_FILE", secretFile)), LookupEnv: env(vars)})
	if err != nil {
		t.Fatal(err)
	}
	ev, files, crm := c.MCPServers["everything"], c.MCPServers["files"], c.MCPServers["crm"]
	if !slices.Equal(ev.Command, []string{"npx", "-y", "@modelcontextprotocol/server-everything"}) || !ev.Stdio() ||
		ev.Env["API_TOKEN"].Reveal() != "mcp-token-55f2b0" || !ev.SideEffects.All || !ev.SideEffects.Has("anything") {
		t.Errorf("everything = %+v", ev)
	}
	if ev.Timeout.D() != config.DefaultMCPTimeout || ev.Concurrency != config.DefaultMCPConcurrency {
		t.Errorf("everything's defaults: timeout %s, concurrency %d", ev.Timeout, ev.Concurrency)
	}
	if len(files.Command) != 3 || files.Command[2] != "/data/my files" || files.Timeout.D() != 5*time.Second || files.Concurrency != 2 ||
		!files.SideEffects.Has("write_file") || files.SideEffects.Has("read_file") {
		t.Errorf("files = %+v", files)
	}
	if crm.Stdio() || crm.URL != "https://mcp.example.com/mcp" || crm.Headers["Authorization"].Reveal() != "Bearer crm-token-7c1a9e" {
		t.Errorf("crm = %+v", crm)
	}
	if names := c.MCPServerNames(); !slices.Equal(names, []string{"crm", "everything", "files"}) {
		t.Errorf("names %v", names)
	}
	for _, s := range []string{"mcp-token-55f2b0", "Bearer crm-token-7c1a9e"} {
		if !slices.Contains(c.Secrets(), s) {
			t.Errorf("Secrets() leaves %q out: the redactor would not remove it", s)
		}
	}
	j, _ := json.Marshal(c)
	y, _ := yaml.Marshal(c)
	for _, shown := range []string{sprintf("%v %+v %#v", c, c.MCPServers, c.MCPServers), string(j), string(y)} {
		if strings.Contains(shown, "mcp-token") || strings.Contains(shown, "crm-token") {
			t.Errorf("a secret shows: %s", shown)
		}
	}
	// a command that holds no secret reads the file without them
	c, err = config.Load(config.Input{Path: write(t, good+mcpServers), LookupEnv: env(map[string]string{}), WithoutProviderKeys: true})
	if err != nil {
		t.Fatalf("without keys: %v", err)
	}
	if s := c.MCPServers["crm"]; s.Headers != nil || s.URL == "" {
		t.Errorf("without keys, crm = %+v", s)
	}
}

// Each bad field is one problem naming it.
func TestMCPServersConfigProblems(t *testing.T) {
	cases := map[string]string{
		"a__b: { command: x }":                                            `mcp_servers.a__b: "a__b" is not a server name`,
		"-a: { command: x }":                                              `mcp_servers.-a: "-a" is not a server name`,
		"a: { command: x, url: http://h/ }":                               "mcp_servers.a: has both command and url",
		"a: { timeout: 5s }":                                              "mcp_servers.a: needs a command",
		"a: { url: ftp://h/ }":                                            `mcp_servers.a.url: "ftp://h/" is not an http(s) URL`,
		"a: { url: http://h/, env: { A: b } }":                            "mcp_servers.a.env: is for a command",
		"a: { command: x, headers: { A: b } }":                            "mcp_servers.a.headers: are for a url",
		"a: { command: x, env: { 1A: b } }":                               `mcp_servers.a.env: "1A" is not an environment variable's name`,
		"a: { url: http://h/, headers: { \"A B\": c } }":                  `mcp_servers.a.headers: "A B" is not a header name`,
		"a: { command: x, timeout: 10ms }":                                "mcp_servers.a.timeout: 10ms is not between 1s and 1h",
		"a: { command: x, concurrency: -1 }":                              "mcp_servers.a.concurrency: -1 is not between 1 and 1000",
		"a: { command: x, side_effects: some }":                           "side_effects is a list of tool names, or all",
		"a: { command: x, side_effects: [w, w] }":                         `mcp_servers.a.side_effects[1]: "w" is listed twice`,
		"a: { command: { x: 1 } }":                                        "command is a list (program and arguments) or a string",
		"a: { command: x, env: { A: \"${UNSET_MCP_VAR}\" } }":             "environment variable UNSET_MCP_VAR is not set",
		"a: { command: x, frobnicate: 1 }":                                `unknown field "frobnicate"`,
		"a: { url: \"http://user:pw-5f1c@h/\", env: { A: b } }":           "mcp_servers.a.env: is for a command",
		"a: { url: http://h/, headers: { A: \"line\\r\\nbreak-4d2e\" } }": "mcp_servers.a.headers.A: holds a line break",
	}
	for entry, want := range cases {
		_, err := config.Load(config.Input{Path: write(t, good+"mcp_servers:\n  "+entry+"\n"), LookupEnv: env(map[string]string{"OA_KEY": "k", "AN_KEY": "k"})})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %q", entry, err, want)
			continue
		}
		if strings.Contains(err.Error(), "pw-5f1c") || strings.Contains(err.Error(), "break-4d2e") {
			t.Errorf("%s: the error shows a secret: %v", entry, err)
		}
	}
}

// docs/configuration.md's mcp_servers example states the defaults the
// code has (its lines that say "default").
func TestMCPServersDocumentedDefaults(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\nmcp_servers:")
	if !ok {
		t.Fatal("docs/configuration.md's example file has no mcp_servers section")
	}
	timeout := regexp.MustCompile(`(?m)^\s+timeout: (\S+)\s+#.*default`).FindStringSubmatch(section)
	concurrency := regexp.MustCompile(`(?m)^\s+concurrency: (\d+)\s+#.*default`).FindStringSubmatch(section)
	if timeout == nil || concurrency == nil {
		t.Fatal("the mcp_servers example has no timeout and concurrency lines saying what their default is")
	}
	if d, err := time.ParseDuration(timeout[1]); err != nil || d != config.DefaultMCPTimeout {
		t.Errorf("documented timeout default %s, the code's %s", timeout[1], config.DefaultMCPTimeout)
	}
	if concurrency[1] != sprintf("%d", config.DefaultMCPConcurrency) {
		t.Errorf("documented concurrency default %s, the code's %d", concurrency[1], config.DefaultMCPConcurrency)
	}
}

// docs/mcp.md's agentq.yaml (the first YAML block of "Configure the
// servers") loads as it says.
func TestMCPDocExampleLoads(t *testing.T) {
	doc, err := os.ReadFile("../../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## Configure the servers\n")
	if !ok {
		t.Fatal("docs/mcp.md has no section \"Configure the servers\"")
	}
	_, rest, _ := strings.Cut(section, "```yaml\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/mcp.md has no YAML block")
	}
	vars := map[string]string{"OPENAI_API_KEY": "k", "EVERYTHING_TOKEN": "e-token-1", "CRM_MCP_TOKEN": "c-token-2"}
	c, err := config.Load(config.Input{Path: "mcp.md", Data: []byte(block), LookupEnv: env(vars)})
	if err != nil {
		t.Fatal(err)
	}
	ev, crm := c.MCPServers["everything"], c.MCPServers["crm"]
	if !ev.Stdio() || ev.Command[0] != "npx" || ev.Timeout.D() != 60*time.Second || ev.Concurrency != 4 || !ev.SideEffects.Has("trigger-long-running-operation") ||
		crm.URL == "" || crm.Headers["Authorization"].Reveal() != "Bearer c-token-2" || !crm.SideEffects.All || crm.Concurrency != config.DefaultMCPConcurrency {
		t.Errorf("servers %+v", c.MCPServers)
	}
}
