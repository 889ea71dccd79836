// Package mcpserve is agentq as an MCP server (Model Context Protocol): the
// tools submit_workflow, workflow_status, workflow_result, list_workflows,
// approve_step, reject_step, send_signal and cancel_workflow, over the
// producer client every face uses. The enqueue command serves them on
// stdin and stdout (enqueue mcp), the dashboard over streamable HTTP
// (POST /mcp). docs/mcp-server.md describes them.
//
// Each tool's arguments are those of the JSON API operation it mirrors
// (internal/dashboard/openapi.json), by the same names and JSON types: a
// path or query parameter is an argument of its name, a header such as
// Idempotency-Key is idempotency_key, a JSON body's fields are arguments,
// and a raw spec body is spec. The input schemas are generated from the
// Go types in inputs.go; a test holds them to the OpenAPI document.
package mcpserve

import (
	"context"
	"fmt"
	"iter"
	"runtime/debug"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
)

// Backend is what the tools call: the producer client (internal/client's
// Client, over Redis or over a dashboard's API) satisfies it.
type Backend interface {
	Parse(source string, data []byte) (*spec.Spec, error)
	SubmitWorkflow(ctx context.Context, wspec *spec.Spec, opts ...producer.SubmitOption) (producer.Submission, error)
	Status(ctx context.Context, id string) (*producer.Workflow, error)
	Result(ctx context.Context, id string) (*producer.Result, error)
	ListPage(ctx context.Context, o producer.ListOptions) ([]*producer.Workflow, error)
	Decide(ctx context.Context, id, step string, approve bool, comment, by string) (string, error)
	Signal(ctx context.Context, s producer.Signal) (*producer.SignalResult, error)
	Cancel(ctx context.Context, id string) (string, error)
	Events(ctx context.Context, id, after string) iter.Seq2[record.Event, error]
}

// Options configures the server.
type Options struct {
	// ReadOnly serves the read tools only (workflow_status,
	// workflow_result, list_workflows): the others are not listed, and a
	// call to one is answered with a tool error saying so.
	ReadOnly bool
	// By is who decisions are recorded as (a decision's "by"); "": "mcp".
	By string
	// Version is the server's version in the MCP handshake; "": the
	// module's version the binary was built from, else "dev".
	Version string
	// MaxWait is the longest a submit_workflow with wait may wait
	// (wait_seconds); 0: DefaultMaxWait.
	MaxWait time.Duration
	// MaxWaiting is how many submit_workflow calls may wait at once; one
	// past it returns at once, saying so; 0: DefaultMaxWaiting.
	MaxWaiting int
	// Stop, when done, ends every wait at once (the server shuts down):
	// each returns the workflow as it is then. nil: never.
	Stop context.Context
}

// Bounds of a wait (Options, SubmitInput.WaitSeconds) and of its progress.
const (
	DefaultWait       = 60 * time.Second
	DefaultMaxWait    = 10 * time.Minute
	DefaultMaxWaiting = 100
	// MaxProgress is the most progress notifications one call sends;
	// later events are not sent (the result says how it ended).
	MaxProgress = 1000
)

// MaxMessageBytes bounds one JSON-RPC message a transport reads: twice
// the larger of a spec's and a signal's bounds (escaping in a JSON string
// may double a spec's bytes), and 64 KiB for the rest of the message.
func MaxMessageBytes(maxSpecBytes, maxSignalBytes int) int64 {
	return 2*int64(max(maxSpecBytes, maxSignalBytes)) + 64<<10
}

// Tool names.
const (
	ToolSubmit   = "submit_workflow"
	ToolStatus   = "workflow_status"
	ToolResult   = "workflow_result"
	ToolList     = "list_workflows"
	ToolApprove  = "approve_step"
	ToolReject   = "reject_step"
	ToolSignal   = "send_signal"
	ToolCancel   = "cancel_workflow"
	instructions = `agentq runs LLM agent workflows (a spec of steps: prompts, code steps, approvals, signals, maps) on workers behind a Redis queue.
Submit a spec with submit_workflow (wait: true waits for it, sending progress when the request has a progress token), read it with workflow_status and workflow_result, find workflows with list_workflows. A workflow waiting for a person's decision goes on after approve_step or reject_step; a step that waits for a signal (wait_for:) is completed by send_signal; cancel_workflow stops one.`
)

// readTools are the tools that change nothing.
var readTools = map[string]bool{ToolStatus: true, ToolResult: true, ToolList: true}

// New builds the MCP server over b.
func New(b Backend, o Options) (*mcp.Server, error) {
	if o.By == "" {
		o.By = "mcp"
	}
	if o.Version == "" {
		o.Version = "dev"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			o.Version = bi.Main.Version
		}
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.MaxWaiting <= 0 {
		o.MaxWaiting = DefaultMaxWaiting
	}
	if o.Stop == nil {
		o.Stop = context.Background()
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "agentq", Title: "agentq workflows", Version: o.Version},
		&mcp.ServerOptions{Instructions: instructions, Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}})
	t := &tools{b: b, o: o, waiting: make(chan struct{}, o.MaxWaiting)}
	for _, d := range t.defs() {
		if o.ReadOnly && !readTools[d.tool.Name] {
			continue
		}
		if err := d.add(srv); err != nil {
			return nil, fmt.Errorf("mcpserve: tool %s: %w", d.tool.Name, err)
		}
	}
	if o.ReadOnly {
		srv.AddReceivingMiddleware(refuseWrites)
	}
	return srv, nil
}

// refuseWrites answers a call to a tool that changes something, on a
// read-only server, with a tool error that says why (the tool is not
// listed, but a client may know it from elsewhere).
func refuseWrites(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if call, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" && call.Params != nil && !readTools[call.Params.Name] && isTool(call.Params.Name) {
			return failure("read_only", fmt.Sprintf("%s is refused: this agentq MCP server is read-only (it serves %s, %s and %s)", call.Params.Name, ToolStatus, ToolResult, ToolList), nil), nil
		}
		return next(ctx, method, req)
	}
}

func isTool(name string) bool {
	switch name {
	case ToolSubmit, ToolStatus, ToolResult, ToolList, ToolApprove, ToolReject, ToolSignal, ToolCancel:
		return true
	}
	return false
}
