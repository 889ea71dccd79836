package mcptool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/mcptool/mcptest"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/redact"
	"github.com/agentq/agentq/retry"
)

// the test binary is the stdio server when started as one
func init() { mcptest.Main() }

const envSecret = "env-secret-9f3b2c71"

// stdioServer is this test binary as a stdio server logging to dir.
func stdioServer(dir string) config.MCPServer {
	return config.MCPServer{Command: []string{os.Args[0], "-test.run=^$"},
		Env:     map[string]config.Secret{mcptest.Env: "1", mcptest.DirEnv: config.Secret(dir), "API_TOKEN": envSecret},
		Timeout: config.Duration(10 * time.Second), Concurrency: 4}
}

// syncBuffer is a log a server's goroutines write while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// counts is an Observer that counts calls by "server tool outcome" and
// starts by "server result".
type counts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counts) MCPCall(server, tool, outcome string, _ time.Duration) {
	c.add(server + " " + tool + " " + outcome)
}
func (c *counts) MCPStart(server, result string) { c.add(server + " " + result) }
func (c *counts) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[k]++
}
func (c *counts) get(k string) int { c.mu.Lock(); defer c.mu.Unlock(); return c.n[k] }

func newPool(t *testing.T, servers map[string]config.MCPServer, logs *syncBuffer, obs Observer, maxResult int) *Pool {
	t.Helper()
	r := redact.New(envSecret, "Bearer hdr-secret-41d07e")
	p := New(servers, Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)), Redact: r.String, MaxResultBytes: maxResult,
		Breakers: router.NewBreakers(nil, breaker.Config{ConsecutiveFailures: 2, ErrorRate: 1, MinCalls: 100, Window: 10 * time.Second, Cooldown: time.Minute, ProbeTimeout: time.Minute}, nil, nil, nil),
		Observer: obs})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Close(ctx)
	})
	return p
}

func call(t *testing.T, p *Pool, server, tool, args string) (string, bool, error) {
	t.Helper()
	r, err := p.Call(t.Context(), server, tool, json.RawMessage(args), nil)
	return r.Content, r.IsError, err
}

// A stdio server started on first use: its tools listed with their
// schemas; a text answer, structured content, a tool's error result; its
// environment is its env with PATH and HOME alone; its stderr is in the
// log line by line, scrubbed of secrets and bounded.
func TestStdioServer(t *testing.T) {
	dir := t.TempDir()
	logs, obs := &syncBuffer{}, &counts{}
	t.Setenv("AGENTQ_MCP_LEAK", "the worker's own environment")
	p := newPool(t, map[string]config.MCPServer{"local": stdioServer(dir)}, logs, obs, 1<<20)
	if !p.Has("local") || p.Has("other") {
		t.Fatal("Has")
	}
	tools, err := p.Tools(t.Context(), "local")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
		if tl.Name == "echo" && (tl.Description != "Echoes the text" || !strings.Contains(string(tl.InputSchema), `"text"`)) {
			t.Errorf("echo: %+v", tl)
		}
	}
	if want := "add big change crash echo env fail header poke stderr wait"; strings.Join(names, " ") != want {
		t.Errorf("tools %v, want %s", names, want)
	}
	for _, c := range []struct{ tool, args, want string }{
		{"echo", `{"text":"hello"}`, "hello"},
		{"add", `{"a":2,"b":40}`, `{"sum":42}`},
		{"env", `{"name":"AGENTQ_MCP_LEAK"}`, "AGENTQ_MCP_LEAK="},
		{"env", `{"name":"API_TOKEN"}`, "API_TOKEN=" + envSecret}, // the engine scrubs results
		{"env", `{"name":"HOME"}`, "HOME=" + os.Getenv("HOME")},
	} {
		if got, isErr, err := call(t, p, "local", c.tool, c.args); err != nil || isErr || got != c.want {
			t.Errorf("%s %s: %q %v %v, want %q", c.tool, c.args, got, isErr, err, c.want)
		}
	}
	if got, isErr, err := call(t, p, "local", "fail", `{"text":"no such order"}`); err != nil || !isErr || got != "no such order" {
		t.Errorf("fail: %q %v %v", got, isErr, err)
	}
	long := "token " + envSecret + " " + strings.Repeat("y", 5000)
	if _, _, err := call(t, p, "local", "stderr", `{"text":"`+long+`"}`); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, func() (bool, string) {
		return strings.Contains(logs.String(), `"line":"token [redacted] yyy`), "the stderr line is not in the log: " + logs.String()
	})
	if strings.Contains(logs.String(), envSecret) || !strings.Contains(logs.String(), "more bytes)") || strings.Contains(logs.String(), strings.Repeat("y", maxStderrLine+1)) {
		t.Errorf("the stderr line is not scrubbed and bounded: %s", logs.String())
	}
	if obs.get("local started") != 1 || obs.get("local echo ok") != 1 || obs.get("local fail tool_error") != 1 {
		t.Errorf("observed %v", obs.n)
	}
}

// A server that says its tool list changed is listed again.
func TestToolListChanged(t *testing.T) {
	p := newPool(t, map[string]config.MCPServer{"local": stdioServer(t.TempDir())}, &syncBuffer{}, nil, 1<<20)
	has := func(name string) bool {
		tools, err := p.Tools(t.Context(), "local")
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(tools, func(tl engine.MCPTool) bool { return tl.Name == name })
	}
	if has("extra") {
		t.Fatal("extra before the change")
	}
	if _, _, err := call(t, p, "local", "change", `{}`); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, func() (bool, string) { return has("extra"), "the list was not read again after it changed" })
}

// A server that dies during a call: the call fails as unreachable (class
// network), and the next call starts it again, after the backoff.
func TestStdioServerRestarted(t *testing.T) {
	dir := t.TempDir()
	logs, obs := &syncBuffer{}, &counts{}
	p := newPool(t, map[string]config.MCPServer{"local": stdioServer(dir)}, logs, obs, 1<<20)
	_, _, err := call(t, p, "local", "crash", `{"key":"k"}`)
	if retry.ClassOf(err) != retry.Network || !strings.Contains(err.Error(), "MCP server local is unreachable") {
		t.Fatalf("a call during which the server died: %v (class %s)", err, retry.ClassOf(err))
	}
	started := time.Now()
	got, _, err := call(t, p, "local", "crash", `{"key":"k"}`)
	if err != nil || got != "survived k" {
		t.Fatalf("after the restart: %q %v", got, err)
	}
	if took := time.Since(started); took < restartBase/2 {
		t.Errorf("restarted after %s: no backoff", took)
	}
	if obs.get("local started") != 2 || obs.get("local exited") != 1 || obs.get("local crash unreachable") != 1 {
		t.Errorf("observed %v", obs.n)
	}
	if !strings.Contains(logs.String(), "MCP server connection lost") {
		t.Errorf("the loss is not in the log: %s", logs.String())
	}
}

// Failures, each of its class: a command that cannot start and a URL
// that refuses connections are unreachable (network; the breaker opens
// after three, and then calls fail at once); a call past the server's
// timeout is a timeout; an unknown tool is a protocol error (bad_request);
// a message over the bound is bad_request, over stdio and HTTP.
func TestFailureClasses(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	slow := stdioServer(dir)
	slow.Timeout = config.Duration(time.Second)
	hs := httptest.NewServer(mcptest.Handler(dir))
	t.Cleanup(hs.Close)
	obs := &counts{}
	p := newPool(t, map[string]config.MCPServer{
		"nothere": {Command: []string{filepath.Join(dir, "no-such-program")}, Timeout: config.Duration(5 * time.Second), Concurrency: 1},
		"refused": {URL: closed, Timeout: config.Duration(5 * time.Second), Concurrency: 1},
		"slow":    slow,
		"local":   stdioServer(dir),
		"web":     {URL: hs.URL, Timeout: config.Duration(10 * time.Second), Concurrency: 2},
	}, &syncBuffer{}, obs, 1000)
	for _, server := range []string{"nothere", "refused"} {
		_, _, err := call(t, p, server, "echo", `{"text":"x"}`)
		if retry.ClassOf(err) != retry.Network || !strings.Contains(err.Error(), "MCP server "+server+" is unreachable") {
			t.Errorf("%s: %v (class %s)", server, err, retry.ClassOf(err))
		}
	}
	// the breaker: two failures in a row open it
	if _, err := p.Tools(t.Context(), "refused"); retry.ClassOf(err) != retry.Network {
		t.Fatalf("listing a refused server: %v", err)
	}
	if _, _, err := call(t, p, "refused", "echo", `{"text":"x"}`); err == nil || !strings.Contains(err.Error(), "breaker is open") {
		t.Errorf("after repeated failures: %v", err)
	}
	if obs.get("refused echo breaker_open") != 1 {
		t.Errorf("observed %v", obs.n)
	}
	_, _, err = call(t, p, "slow", "wait", `{"key":"never"}`)
	if retry.ClassOf(err) != retry.Timeout || !strings.Contains(err.Error(), "no answer in time (its timeout is 1s)") {
		t.Errorf("a call past its timeout: %v (class %s)", err, retry.ClassOf(err))
	}
	_, _, err = call(t, p, "web", "no_such_tool", `{}`)
	if retry.ClassOf(err) != retry.BadRequest || !strings.Contains(err.Error(), "protocol error") {
		t.Errorf("an unknown tool: %v (class %s)", err, retry.ClassOf(err))
	}
	for _, server := range []string{"local", "web"} { // a big message takes a while under -race: not the slow one
		_, _, err = call(t, p, server, "big", `{"n":1100000}`)
		if retry.ClassOf(err) != retry.BadRequest || !strings.Contains(err.Error(), "more than 1050576 bytes") {
			t.Errorf("%s: a message over the bound: %v (class %s)", server, err, retry.ClassOf(err))
		}
		if got, _, err := call(t, p, server, "echo", `{"text":"after"}`); err != nil || got != "after" {
			t.Errorf("%s: after a message over the bound: %q %v", server, got, err)
		}
	}
}

// A server whose answer is not MCP (a tools/call result of the wrong
// shape) is a protocol error: bad_request, not retried.
func TestAnAnswerThatIsNotMCPIsABadRequest(t *testing.T) {
	srv := stdioServer(t.TempDir())
	srv.Env[mcptest.Env] = mcptest.Malformed
	p := newPool(t, map[string]config.MCPServer{"odd": srv}, &syncBuffer{}, nil, 1<<20)
	_, _, err := call(t, p, "odd", "echo", `{}`)
	if retry.ClassOf(err) != retry.BadRequest || !strings.Contains(err.Error(), "answered what MCP does not allow") {
		t.Fatalf("an answer that is not MCP: %v (class %s), want a protocol error (bad_request)", err, retry.ClassOf(err))
	}
}

// An HTTP server gets the configured headers with every request.
func TestHTTPServerHeaders(t *testing.T) {
	hs := httptest.NewServer(mcptest.Handler(t.TempDir()))
	t.Cleanup(hs.Close)
	p := newPool(t, map[string]config.MCPServer{"web": {URL: hs.URL, Headers: map[string]config.Secret{"Authorization": "Bearer hdr-secret-41d07e", "X-Tenant": "acme"},
		Timeout: config.Duration(10 * time.Second), Concurrency: 2}}, &syncBuffer{}, nil, 1<<20)
	for name, want := range map[string]string{"X-Tenant": "acme", "Authorization": "Bearer hdr-secret-41d07e"} {
		if got, _, err := call(t, p, "web", "header", `{"name":"`+name+`"}`); err != nil || got != name+": "+want {
			t.Errorf("header %s: %q %v", name, got, err)
		}
	}
}

// A side-effect call's started runs right before it is sent, with the
// call's context (the server's timeout its deadline); its error stops the
// call, which the server never sees.
func TestStartedBeforeTheCall(t *testing.T) {
	dir := t.TempDir()
	p := newPool(t, map[string]config.MCPServer{"local": stdioServer(dir)}, &syncBuffer{}, nil, 1<<20)
	refused := errors.New("mark not kept")
	_, err := p.Call(t.Context(), "local", "poke", json.RawMessage(`{"key":"a"}`), func(context.Context) error { return refused })
	if !errors.Is(err, refused) {
		t.Fatalf("a call whose mark was not kept: %v", err)
	}
	n := 0
	var within time.Duration
	r, err := p.Call(t.Context(), "local", "poke", json.RawMessage(`{"key":"b"}`), func(ctx context.Context) error {
		n++
		if dl, ok := ctx.Deadline(); ok {
			within = time.Until(dl)
		}
		return nil
	})
	if err != nil || r.Content != "poked b" || n != 1 {
		t.Fatalf("%+v %v, started %d times", r, err, n)
	}
	if within <= 0 || within > 10*time.Second {
		t.Errorf("started's context ends in %s, want within the server's timeout (10s)", within)
	}
	if got := mcptest.Calls(dir); !slices.Equal(got, []string{"poke b"}) {
		t.Errorf("the server saw %v", got)
	}
}

// A server's concurrency bounds the calls a worker makes to it at once:
// with 2, the third of three waits is sent only once one of the first
// two has returned.
func TestConcurrencyLimit(t *testing.T) {
	dir := t.TempDir()
	srv := stdioServer(dir)
	srv.Concurrency = 2
	p := newPool(t, map[string]config.MCPServer{"local": srv}, &syncBuffer{}, nil, 1<<20)
	done := make(chan error, 3)
	for _, key := range []string{"a", "b", "c"} {
		go func() { _, _, err := call(t, p, "local", "wait", `{"key":"`+key+`"}`); done <- err }()
	}
	waits := func() int {
		n := 0
		for _, c := range mcptest.Calls(dir) {
			if strings.HasPrefix(c, "wait ") {
				n++
			}
		}
		return n
	}
	poll.Until(t, 10*time.Second, func() (bool, string) { return waits() == 2, fmt.Sprintf("calls %v", mcptest.Calls(dir)) })
	for _, key := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(dir, "release-"+key), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if waits() != 3 || mcptest.Count(dir, "inflight 3") != 0 {
		t.Errorf("calls %v: more than 2 at once", mcptest.Calls(dir))
	}
}
