package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/mcpserve"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/testenv"
)

// bearer adds the dashboard token to every request.
type bearer struct{ tok string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpClient connects the SDK's client to d's POST /mcp with tok (""
// none); progress notifications go to onProgress.
func mcpClient(t *testing.T, d *dash, tok string, onProgress func(*mcp.ProgressNotificationParams)) (*mcp.ClientSession, error) {
	t.Helper()
	hc := &http.Client{Timeout: time.Minute}
	if tok != "" {
		hc.Transport = bearer{tok}
	}
	opts := &mcp.ClientOptions{}
	if onProgress != nil {
		opts.ProgressNotificationHandler = func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { onProgress(r.Params) }
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "dashboard-test"}, opts).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: d.URL + "/mcp", HTTPClient: hc, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// structured is a tool result's structured content as a map.
func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return m
}

// POST /mcp is behind the dashboard's token; with it, an MCP client lists
// the eight tools and submits a workflow that it waits for, its progress
// streamed as notifications/progress; a body over the bound is 413.
func TestMCPOverHTTP(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	d := serveDash(t, e, dashboard.Options{Token: token})

	if r := d.do(t, call{Method: "POST", Path: "/mcp", JSON: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`}); r.Code != http.StatusUnauthorized {
		t.Fatalf("no token: %d %s", r.Code, r.Body)
	}
	if _, err := mcpClient(t, d, "wrong-token", nil); err == nil {
		t.Fatal("a client with a wrong token connected")
	}
	var (
		mu    sync.Mutex
		notes []*mcp.ProgressNotificationParams
	)
	cs, err := mcpClient(t, d, token, func(p *mcp.ProgressNotificationParams) { mu.Lock(); notes = append(notes, p); mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	if got := toolNames(t, cs); len(got) != 8 {
		t.Fatalf("tools %v", got)
	}
	params := &mcp.CallToolParams{Name: mcpserve.ToolSubmit, Arguments: map[string]any{
		"spec":  "name: two\nsteps:\n  - { id: a, route: solo, prompt: \"hello {{ .Input.who }}\" }\n  - { id: b, route: solo, prompt: \"and {{ .Steps.a.Output }}\", depends_on: [a] }\n",
		"input": []string{"who=Grace"}, "wait": true, "wait_seconds": 30}}
	params.SetProgressToken("submit-1")
	res, err := cs.CallTool(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	out := structured(t, res)
	if res.IsError || out["state"] != "completed" || out["waited"] != "ended" {
		t.Fatalf("submit with wait: %+v", out)
	}
	// the client hands notifications to its handler apart from the
	// result: the last may come a moment after it
	poll.Until(t, 5*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(notes) > 0 && strings.HasPrefix(notes[len(notes)-1].Message, "workflow "), fmt.Sprintf("%d notifications, the workflow's end not among them", len(notes))
	})
	mu.Lock()
	defer mu.Unlock()
	var msgs []string
	for i, n := range notes {
		msgs = append(msgs, n.Message)
		if n.ProgressToken != "submit-1" || n.Progress != float64(i+1) {
			t.Errorf("notification %d: token %v progress %v", i, n.ProgressToken, n.Progress)
		}
	}
	// the notifications come before the result, on the call's own stream
	joined := strings.Join(msgs, "\n")
	for _, want := range []string{"step a started", "step a done (1 of 2 steps settled)", "step b done (2 of 2 steps settled)", "workflow completed"} {
		if !strings.Contains(joined, want) {
			t.Errorf("progress lacks %q:\n%s", want, joined)
		}
	}

	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"submit_workflow","arguments":{"spec":"` +
		strings.Repeat("x", int(mcpserve.MaxMessageBytes(e.Config.Limits.MaxSpecBytes, e.Config.Limits.MaxSignalBytes))) + `"}}}`
	r := d.do(t, call{Method: "POST", Path: "/mcp", JSON: big, Bearer: token, Header: map[string]string{"Accept": "application/json, text/event-stream"}})
	if r.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the bound: %d %.200s", r.Code, r.Body)
	}
}

// A read-only dashboard lists the read tools only, refuses a call to
// another with a tool error that says so, and reads.
func TestMCPReadOnly(t *testing.T) {
	e, id := pending(t)
	d := serveDash(t, e, dashboard.Options{Token: token, ReadOnly: true})
	cs, err := mcpClient(t, d, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := toolNames(t, cs), []string{mcpserve.ToolList, mcpserve.ToolResult, mcpserve.ToolStatus}; !slices.Equal(got, want) {
		t.Fatalf("read-only tools %v, want %v", got, want)
	}
	for _, name := range []string{mcpserve.ToolSubmit, mcpserve.ToolCancel} {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"id": id, "spec": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		if out := structured(t, res); !res.IsError || out["code"] != "read_only" || !strings.Contains(out["error"].(string), "read-only") {
			t.Errorf("%s on a read-only dashboard: %+v", name, out)
		}
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: mcpserve.ToolStatus, Arguments: map[string]any{"id": id}})
	if err != nil || res.IsError || structured(t, res)["state"] != "pending" {
		t.Fatalf("status on a read-only dashboard: %v %+v", err, res)
	}
	if e.Store == nil {
		t.Fatal("no store")
	}
	if wf, err := e.Store.Get(t.Context(), id); err != nil || wf.State != "pending" {
		t.Fatalf("the workflow changed: %v %v", err, wf)
	}
}
