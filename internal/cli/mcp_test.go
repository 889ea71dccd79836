package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/mcpserve"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/testenv"
)

// enqueueChild makes this test binary the enqueue command (as
// cmd/enqueue's main) when a test starts it with the variable set: a real
// process on real pipes, without building the binary.
const enqueueChild = "AGENTQ_TEST_ENQUEUE_PROCESS"

func init() {
	if os.Getenv(enqueueChild) != "1" {
		return
	}
	env := cli.Env{Out: os.Stdout, Err: os.Stderr}
	os.Exit(cli.Run(cli.Enqueue(env), env, os.Args[1:]))
}

// startMCP runs `enqueue mcp ARGS` as a process against e and connects
// the SDK's MCP client to its stdin and stdout.
func startMCP(t *testing.T, e *testenv.Env, args ...string) (*mcp.ClientSession, *exec.Cmd, *testenv.Buffer) {
	t.Helper()
	vars, cfg := envFor(t, e)
	cmd := exec.Command(os.Args[0], append([]string{"mcp", "--config", cfg}, args...)...)
	cmd.Env = append(os.Environ(), enqueueChild+"=1")
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stderr := &testenv.Buffer{}
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "cli-test"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to enqueue mcp: %v; stderr:\n%s", err, stderr.String())
	}
	return cs, cmd, stderr
}

// callTool calls a tool and returns its result's structured content.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: structured content %s: %v", name, b, err)
	}
	if res.IsError {
		if len(res.Content) != 1 || strings.Contains(res.Content[0].(*mcp.TextContent).Text, "\n") {
			t.Errorf("%s: a tool error is not one line: %+v", name, res.Content)
		}
	}
	return out, res.IsError
}

// `enqueue mcp` is an MCP server on stdin and stdout: it lists the eight
// tools; a submitted workflow completes (workflow_status sees it); a wait
// returns when a step waits for a decision, and approve_step releases it;
// bad arguments, a spec that does not check and a missing workflow are
// one-line tool errors with the API's codes; closing stdin ends it (exit 0).
func TestEnqueueMCPOverStdio(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"after": func(ctx context.Context, s *engine.CodeStep) (any, error) { return "after", nil }}})
	cs, cmd, stderr := startMCP(t, e)

	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	want := []string{mcpserve.ToolApprove, mcpserve.ToolCancel, mcpserve.ToolList, mcpserve.ToolReject, mcpserve.ToolSignal, mcpserve.ToolSubmit, mcpserve.ToolResult, mcpserve.ToolStatus}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}

	out, isErr := callTool(t, cs, mcpserve.ToolSubmit, map[string]any{"spec": hello, "input": []string{"who=Grace"}})
	id, _ := out["id"].(string)
	if isErr || !strings.HasPrefix(id, "wf_") {
		t.Fatalf("submit: %+v", out)
	}
	poll.Until(t, 20*time.Second, func() (bool, string) {
		out, isErr := callTool(t, cs, mcpserve.ToolStatus, map[string]any{"id": id})
		return !isErr && out["state"] == "completed", "workflow_status: " + out["state"].(string)
	})
	out, _ = callTool(t, cs, mcpserve.ToolResult, map[string]any{"id": id})
	if final, _ := out["final"].([]any); len(final) != 1 || !strings.Contains(final[0].(map[string]any)["output"].(string), "chaosllm answer") {
		t.Errorf("workflow_result: %+v", out)
	}

	gate := "name: gate\nsteps:\n  - { id: gate, approve: { message: \"go?\" } }\n  - { id: after, run: after, depends_on: [gate] }\n"
	out, isErr = callTool(t, cs, mcpserve.ToolSubmit, map[string]any{"spec": gate, "wait": true, "wait_seconds": 30})
	gid, _ := out["id"].(string)
	if isErr || out["state"] != "waiting" || out["waited"] != "waiting" || !strings.Contains(out["note"].(string), mcpserve.ToolApprove) {
		t.Fatalf("submit with wait on an approval: %+v", out)
	}
	out, isErr = callTool(t, cs, mcpserve.ToolApprove, map[string]any{"id": gid, "step": "gate", "comment": "looks right"})
	if isErr || out["decision"] != "approved" {
		t.Fatalf("approve_step: %+v", out)
	}
	poll.Until(t, 20*time.Second, func() (bool, string) {
		out, isErr := callTool(t, cs, mcpserve.ToolStatus, map[string]any{"id": gid})
		return !isErr && out["state"] == "completed", "workflow_status: " + out["state"].(string)
	})
	wf, err := e.Store.Get(t.Context(), gid)
	if err != nil || !strings.Contains(wf.Steps[0].Output, `"approved":true`) || !strings.Contains(wf.Steps[0].Output, `"by":"mcp"`) {
		t.Fatalf("the decision: %v %+v", err, wf)
	}
	if out, isErr = callTool(t, cs, mcpserve.ToolApprove, map[string]any{"id": gid, "step": "gate"}); !isErr || out["code"] != "not_waiting" {
		t.Errorf("a second decision: %+v", out)
	}

	for _, c := range []struct {
		tool       string
		args       map[string]any
		code, text string
	}{
		{mcpserve.ToolStatus, map[string]any{"id": "wf_nope"}, "not_found", "workflow wf_nope not found"},
		{mcpserve.ToolStatus, map[string]any{}, "bad_input", `argument "id" is missing`},
		{mcpserve.ToolSubmit, map[string]any{"spec": 3}, "bad_input", `argument "spec": want a string, not a JSON number`},
		{mcpserve.ToolSubmit, map[string]any{"spec": hello, "deadline": "soon"}, "bad_input", `deadline "soon": want a duration of at least 1s`},
		{mcpserve.ToolSubmit, map[string]any{"spec": hello, "colour": "red"}, "bad_input", `unknown argument "colour"`},
		{mcpserve.ToolSubmit, map[string]any{"spec": strings.Replace(hello, "route: solo", "route: nope", 1)}, "invalid_spec", `spec:4: steps[0] (greet).route: unknown route "nope"`},
		{mcpserve.ToolList, map[string]any{"state": "wiating"}, "unknown_state", "wiating"},
	} {
		out, isErr := callTool(t, cs, c.tool, c.args)
		if !isErr || out["code"] != c.code || !strings.Contains(out["error"].(string), c.text) {
			t.Errorf("%s %v: %+v; want %s with %q", c.tool, c.args, out, c.code, c.text)
		}
	}
	out, _ = callTool(t, cs, mcpserve.ToolList, map[string]any{"limit": 1})
	if ws, _ := out["workflows"].([]any); len(ws) != 1 || out["next_after"] == nil {
		t.Errorf("list_workflows limit 1: %+v", out)
	}

	if err := cs.Close(); err != nil || cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("closing stdin: %v, exit %d; stderr:\n%s", err, cmd.ProcessState.ExitCode(), stderr.String())
	}
}
