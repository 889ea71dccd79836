// Package mcptest is an MCP server for tests, built with the official Go
// SDK: served over stdio by a test binary that Main takes over (a stdio
// server of the worker under test), or over streamable HTTP (Handler).
// Every call is appended to calls.log in its directory, so a test counts
// calls across server processes.
package mcptest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Env, set to 1 in a test binary's environment, makes Main serve MCP over
// stdio; DirEnv is the directory of its calls.log and release files.
const (
	Env    = "AGENTQ_TEST_MCP"
	DirEnv = "AGENTQ_TEST_MCP_DIR"
)

// Main serves the test server over stdio when the environment says so
// (Env), then exits; otherwise it returns at once. Call it from a test
// package's init.
func Main() {
	switch os.Getenv(Env) {
	case "":
		return
	case Malformed:
		serveMalformed()
	}
	err := Server(os.Getenv(DirEnv), true).Run(context.Background(), &mcp.StdioTransport{})
	if err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Malformed, as Env's value, makes Main serve a server that speaks
// JSON-RPC and MCP's handshake but answers tools/call with a result MCP
// does not allow (its content a string, not a list of parts).
const Malformed = "malformed"

// serveMalformed is Malformed's server, on stdin and stdout; it exits
// when stdin ends.
func serveMalformed() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), 1<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || len(m.ID) == 0 {
			continue // a notification
		}
		var result any = map[string]any{}
		switch m.Method {
		case "initialize":
			result = map[string]any{"protocolVersion": m.Params.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "malformed", "version": "1"}}
		case "tools/list":
			result = map[string]any{"tools": []any{map[string]any{"name": "echo", "inputSchema": map[string]any{"type": "object"}}}}
		case "tools/call":
			result = map[string]any{"content": "not a list of parts"}
		}
		_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result})
	}
	os.Exit(0)
}

// HTTPHandler is the test server over streamable HTTP.
type HTTPHandler struct {
	http.Handler
	srv *mcp.Server
}

// Handler serves the test server over streamable HTTP; its calls are
// logged in dir.
func Handler(dir string) *HTTPHandler {
	srv := Server(dir, false)
	return &HTTPHandler{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil), srv: srv}
}

// Close ends every session the server holds: a client that died (a
// SIGKILLed worker) never ends its own.
func (h *HTTPHandler) Close() {
	var open []*mcp.ServerSession
	for ss := range h.srv.Sessions() {
		open = append(open, ss)
	}
	for _, ss := range open {
		_ = ss.Close()
	}
}

type textArgs struct {
	Text string `json:"text" jsonschema:"the text"`
}

type nameArgs struct {
	Name string `json:"name" jsonschema:"a name"`
}

type keyArgs struct {
	Key string `json:"key" jsonschema:"a key"`
}

type sizeArgs struct {
	N int `json:"n" jsonschema:"how many bytes"`
}

type sumArgs struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type sum struct {
	Sum float64 `json:"sum"`
}

// Server is the test server. Its tools:
//   - echo {text}: the text;
//   - env {name}: the server's environment variable (said on stderr too);
//   - header {name}: the HTTP request's header (over HTTP);
//   - fail {text}: an error result (isError) saying the text;
//   - add {a, b}: their sum, as structured content;
//   - wait {key}: waits until the file release-KEY is in dir, then
//     "released KEY" (its line in calls.log is followed by "inflight N":
//     the waits running then, itself included);
//   - poke {key}: "poked KEY" (a side effect: its line in calls.log);
//   - big {n}: n bytes of x;
//   - stderr {text}: writes the text to stderr, answers "logged";
//   - change: adds the tool extra (the server says its list changed);
//   - crash {key}, over stdio only: the process exits during the call,
//     unless the file crashed-KEY is in dir (it makes it first), then
//     "survived KEY".
func Server(dir string, stdio bool) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "agentq-mcptest", Version: "1"}, nil)
	var mu sync.Mutex
	logCall := func(tool, arg string) {
		if dir == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		f, err := os.OpenFile(filepath.Join(dir, "calls.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			fmt.Fprintf(f, "%s %s\n", tool, arg)
			_ = f.Close()
		}
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes the text"}, func(_ context.Context, _ *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, any, error) {
		logCall("echo", a.Text)
		return text(a.Text), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "An environment variable of the server"}, func(_ context.Context, _ *mcp.CallToolRequest, a nameArgs) (*mcp.CallToolResult, any, error) {
		logCall("env", a.Name)
		fmt.Fprintf(os.Stderr, "env: read %s=%s\n", a.Name, os.Getenv(a.Name)) // a server that logs what it read
		return text(a.Name + "=" + os.Getenv(a.Name)), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "header", Description: "A header of the HTTP request"}, func(_ context.Context, req *mcp.CallToolRequest, a nameArgs) (*mcp.CallToolResult, any, error) {
		logCall("header", a.Name)
		v := ""
		if req.Extra != nil && req.Extra.Header != nil {
			v = req.Extra.Header.Get(a.Name)
		}
		return text(a.Name + ": " + v), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Fails with the text"}, func(_ context.Context, _ *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, any, error) {
		logCall("fail", a.Text)
		r := text(a.Text)
		r.IsError = true
		return r, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds two numbers"}, func(_ context.Context, _ *mcp.CallToolRequest, a sumArgs) (*mcp.CallToolResult, sum, error) {
		logCall("add", fmt.Sprint(a.A, a.B))
		return nil, sum{Sum: a.A + a.B}, nil
	})
	var inFlight int
	mcp.AddTool(s, &mcp.Tool{Name: "wait", Description: "Waits for its release"}, func(ctx context.Context, _ *mcp.CallToolRequest, a keyArgs) (*mcp.CallToolResult, any, error) {
		mu.Lock()
		inFlight++
		n := inFlight
		mu.Unlock()
		defer func() { mu.Lock(); inFlight--; mu.Unlock() }()
		logCall("wait", a.Key)
		logCall("inflight", fmt.Sprint(n))
		if err := waitFile(ctx, filepath.Join(dir, "release-"+a.Key)); err != nil {
			return nil, nil, err
		}
		return text("released " + a.Key), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "poke", Description: "Pokes something (a side effect)"}, func(_ context.Context, _ *mcp.CallToolRequest, a keyArgs) (*mcp.CallToolResult, any, error) {
		logCall("poke", a.Key)
		return text("poked " + a.Key), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "n bytes"}, func(_ context.Context, _ *mcp.CallToolRequest, a sizeArgs) (*mcp.CallToolResult, any, error) {
		logCall("big", fmt.Sprint(a.N))
		return text(strings.Repeat("x", a.N)), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "stderr", Description: "Writes to stderr"}, func(_ context.Context, _ *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, any, error) {
		logCall("stderr", a.Text)
		fmt.Fprintln(os.Stderr, a.Text)
		return text("logged"), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "change", Description: "Adds the tool extra"}, func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		logCall("change", "")
		mcp.AddTool(s, &mcp.Tool{Name: "extra", Description: "A tool added later"}, func(_ context.Context, _ *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, any, error) {
			logCall("extra", a.Text)
			return text("extra " + a.Text), nil, nil
		})
		return text("changed"), nil, nil
	})
	if stdio {
		mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exits during the call, once"}, func(_ context.Context, _ *mcp.CallToolRequest, a keyArgs) (*mcp.CallToolResult, any, error) {
			logCall("crash", a.Key)
			mark := filepath.Join(dir, "crashed-"+a.Key)
			if _, err := os.Stat(mark); err != nil {
				if f, err := os.Create(mark); err == nil {
					_ = f.Close()
				}
				os.Exit(3)
			}
			return text("survived " + a.Key), nil, nil
		})
	}
	return s
}

// waitFile waits until path exists or ctx ends.
func waitFile(ctx context.Context, path string) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Calls reads dir's calls.log: each call's "tool arg" line.
func Calls(dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, "calls.log"))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// Count is how many of dir's calls were line.
func Count(dir, line string) int {
	n := 0
	for _, c := range Calls(dir) {
		if c == line {
			n++
		}
	}
	return n
}
