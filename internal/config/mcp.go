package config

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// MCP servers (docs/mcp.md): each is a source of tools a prompt step may
// offer the model (tools: [mcp:NAME] or [mcp:NAME/TOOL]). A worker starts
// a stdio server once, on first use, and restarts it when it exits; it
// reaches an HTTP server over MCP's streamable HTTP transport.

// The defaults of an MCP server's bounds.
const (
	// DefaultMCPTimeout bounds one call to an MCP server (tools/call, or
	// the start and handshake a first call waits for).
	DefaultMCPTimeout = 60 * time.Second
	// DefaultMCPConcurrency is how many calls one worker makes to one MCP
	// server at once; more wait for a free slot.
	DefaultMCPConcurrency = 4
)

// MCPServer is one MCP server: a command (stdio) or a URL (streamable
// HTTP), never both.
type MCPServer struct {
	// Command runs a stdio server: a list (program and arguments) or a
	// string split at spaces. Its environment is Env, PATH and HOME only.
	Command MCPCommand `yaml:"command"`
	// Env is the stdio server's environment, beside PATH and HOME. Its
	// values are secrets: never shown, and removed from what the server
	// answers.
	Env map[string]Secret `yaml:"env"`
	// URL is a streamable HTTP server's endpoint (http or https).
	URL string `yaml:"url"`
	// Headers are sent with every request to URL (Authorization, …); their
	// values are secrets like Env's.
	Headers map[string]Secret `yaml:"headers"`
	// Timeout bounds one call; 0: DefaultMCPTimeout.
	Timeout Duration `yaml:"timeout"`
	// Concurrency is how many calls one worker makes to the server at
	// once; 0: DefaultMCPConcurrency.
	Concurrency int `yaml:"concurrency"`
	// SideEffects names the tools that must not run twice: a call of one
	// that was started but whose outcome was not kept (a crash, a timeout,
	// the server dying during it) dead-letters its step for review instead
	// of running again. `all` marks every tool of the server.
	SideEffects MCPSideEffects `yaml:"side_effects"`
}

// MCPCommand is a stdio server's program and arguments.
type MCPCommand []string

// UnmarshalYAML reads a list, or a string split at spaces.
func (c *MCPCommand) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*c = strings.Fields(n.Value)
		return nil
	case yaml.SequenceNode:
		var l []string
		if err := n.Decode(&l); err != nil {
			return err
		}
		*c = l
		return nil
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: command is a list (program and arguments) or a string", n.Line)}}
}

// MCPSideEffects are the tools of a server that must not run twice.
type MCPSideEffects struct {
	All   bool     // every tool of the server
	Tools []string // else these
}

// Has reports whether tool must not run twice.
func (s MCPSideEffects) Has(tool string) bool { return s.All || slices.Contains(s.Tools, tool) }

// UnmarshalYAML reads a list of tool names, or `all`.
func (s *MCPSideEffects) UnmarshalYAML(n *yaml.Node) error {
	switch {
	case n.Kind == yaml.ScalarNode && n.Value == "all":
		*s = MCPSideEffects{All: true}
		return nil
	case n.Kind == yaml.SequenceNode:
		var l []string
		if err := n.Decode(&l); err != nil {
			return err
		}
		*s = MCPSideEffects{Tools: l}
		return nil
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: side_effects is a list of tool names, or all", n.Line)}}
}

// MarshalYAML writes what UnmarshalYAML reads.
func (s MCPSideEffects) MarshalYAML() (any, error) {
	if s.All {
		return "all", nil
	}
	return s.Tools, nil
}

// Stdio reports whether the server is a command (else a URL).
func (s MCPServer) Stdio() bool { return len(s.Command) > 0 }

// MCPServerNames lists the configured MCP servers in order.
func (c *Config) MCPServerNames() []string {
	names := make([]string, 0, len(c.MCPServers))
	for n := range c.MCPServers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// MCPBreaker is the name an MCP server's breaker is shared under between
// the workers (in the breakers' store, beside the providers'): a
// provider's name cannot hold a colon, so the two never meet.
func MCPBreaker(server string) string { return "mcp:" + server }

// mcpServerName is what a server's name may be: letters, digits, - and
// single underscores, starting and ending with a letter or digit, at most
// 32 (the model sees its tools as mcp__NAME__TOOL, read back unambiguously).
var mcpServerName = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9-]|_[a-zA-Z0-9-]){0,31}$`)

var (
	envName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// fillMCPDefaults sets each server's timeout and concurrency the file
// left out.
func (c *Config) fillMCPDefaults() {
	for name, s := range c.MCPServers {
		if s.Timeout == 0 {
			s.Timeout = Duration(DefaultMCPTimeout)
		}
		if s.Concurrency == 0 {
			s.Concurrency = DefaultMCPConcurrency
		}
		c.MCPServers[name] = s
	}
}

// validateMCPServers returns a problem for each bad server field.
func (c *Config) validateMCPServers() []error {
	var errs []error
	for _, name := range c.MCPServerNames() {
		s := c.MCPServers[name]
		f := "mcp_servers." + name
		bad := func(field, format string, a ...any) {
			errs = append(errs, &FieldError{Field: f + field, Msg: fmt.Sprintf(format, a...)})
		}
		if len(name) > 32 || !mcpServerName.MatchString(name) {
			bad("", "%q is not a server name (1 to 32 letters, digits, - or single _, starting and ending with a letter or digit)", name)
		}
		switch {
		case s.Stdio() && s.URL != "":
			bad("", "has both command and url: a server is one or the other")
		case !s.Stdio() && s.URL == "":
			bad("", "needs a command (a stdio server) or a url (a streamable HTTP server)")
		case s.Stdio():
			if s.Command[0] == "" {
				bad(".command", "its program is empty")
			}
			if len(s.Headers) > 0 {
				bad(".headers", "are for a url; a command's server takes env")
			}
		default:
			if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(".url", "%q is not an http(s) URL", redactURL(s.URL))
			}
			if len(s.Env) > 0 {
				bad(".env", "is for a command; a url's server takes headers")
			}
		}
		for k := range s.Env {
			if !envName.MatchString(k) {
				bad(".env", "%q is not an environment variable's name", k)
			}
		}
		for k, v := range s.Headers {
			if !headerName.MatchString(k) {
				bad(".headers", "%q is not a header name", k)
			}
			if strings.ContainsAny(v.Reveal(), "\r\n") {
				bad(".headers."+k, "holds a line break")
			}
		}
		if d := s.Timeout.D(); d < time.Second || d > time.Hour {
			bad(".timeout", "%s is not between 1s and 1h", d)
		}
		if s.Concurrency < 1 || s.Concurrency > 1000 {
			bad(".concurrency", "%d is not between 1 and 1000", s.Concurrency)
		}
		seen := map[string]bool{}
		for i, t := range s.SideEffects.Tools {
			switch {
			case t == "":
				bad(fmt.Sprintf(".side_effects[%d]", i), "is empty")
			case seen[t]:
				bad(fmt.Sprintf(".side_effects[%d]", i), "%q is listed twice", t)
			}
			seen[t] = true
		}
	}
	return errs
}

// mcpSecrets are the values of every server's env and headers.
func (c Config) mcpSecrets() []string {
	var out []string
	for _, name := range c.MCPServerNames() {
		s := c.MCPServers[name]
		for _, v := range s.Env {
			if v != "" {
				out = append(out, v.Reveal())
			}
		}
		for _, v := range s.Headers {
			if v != "" {
				out = append(out, v.Reveal())
			}
		}
	}
	return out
}

// dropMCPSecrets removes every mcp_servers.*.env and .headers from a parsed
// file, for a command that holds no secret (Input.WithoutProviderKeys):
// an unset ${VAR} there is then no error, and nothing of them is read.
func dropMCPSecrets(root *yaml.Node) {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return
	}
	top := root.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value != "mcp_servers" || top.Content[i+1].Kind != yaml.MappingNode {
			continue
		}
		servers := top.Content[i+1]
		for j := 1; j < len(servers.Content); j += 2 {
			s := servers.Content[j]
			if s.Kind != yaml.MappingNode {
				continue
			}
			for k := 0; k+1 < len(s.Content); k += 2 {
				if v := s.Content[k].Value; v == "env" || v == "headers" {
					s.Content = append(s.Content[:k:k], s.Content[k+2:]...)
					k -= 2
				}
			}
		}
	}
}
