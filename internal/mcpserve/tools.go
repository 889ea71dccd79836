package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/producer"
)

// tools are the server's tools over one backend.
type tools struct {
	b       Backend
	o       Options
	waiting chan struct{} // a slot per submit_workflow that waits (MaxWaiting)
}

// toolDef is one tool: its description, and how it is added to a server
// (with its input schema, generated from its input type).
type toolDef struct {
	tool *mcp.Tool
	add  func(*mcp.Server) error
}

// def defines tool t whose arguments are an In, handled by h. h's result
// is the tool's structured content (and its text, as JSON); its error is
// the tool error toolError makes of it.
func def[In any](t *mcp.Tool, h func(context.Context, *mcp.CallToolRequest, *In) (any, error)) toolDef {
	return toolDef{tool: t, add: func(s *mcp.Server) error {
		schema, err := schemaFor[In]()
		if err != nil {
			return err
		}
		if _, err := schema.Resolve(nil); err != nil {
			return err
		}
		t.InputSchema = schema
		s.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in In
			var raw json.RawMessage
			if req.Params != nil {
				raw = req.Params.Arguments
			}
			if err := decodeArgs(raw, schema, &in); err != nil {
				return toolError(err, ""), nil
			}
			out, err := h(ctx, req, &in)
			if err != nil {
				var ab *about
				what := ""
				if errors.As(err, &ab) {
					what = ab.what
				}
				return toolError(err, what), nil
			}
			return success(out)
		})
		return nil
	}}
}

// success is a tool's result: out as structured content, and as its text.
func success(out any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("mcpserve: the result: %w", err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}, nil
}

// about names what a failed call was about ("workflow wf_…"), for a
// not-found's message.
type about struct {
	what string
	err  error
}

func (e *about) Error() string { return e.err.Error() }
func (e *about) Unwrap() error { return e.err }

func workflowErr(id string, err error) error {
	if err == nil {
		return nil
	}
	return &about{what: "workflow " + flow.BoundID(id), err: err}
}

func hint(b bool) *bool { return &b }

func (t *tools) defs() []toolDef {
	return []toolDef{
		def(&mcp.Tool{Name: ToolSubmit, Title: "Submit a workflow",
			Description: "Submit a workflow spec (YAML or JSON): it is checked, written and its first steps queued; returns the workflow (id, state, steps). " +
				"With wait: true, waits until it ends (completed, failed, canceled, timed_out), waits for a person's decision (state waiting: approve_step or reject_step), is blocked on a dead-lettered step, or wait_seconds pass; " +
				"with a progress token, each step's progress is sent as notifications/progress. idempotency_key makes a submit safe to repeat.",
			Annotations: &mcp.ToolAnnotations{Title: "Submit a workflow", DestructiveHint: hint(false), OpenWorldHint: hint(true)}}, t.submit),
		def(&mcp.Tool{Name: ToolStatus, Title: "Workflow status",
			Description: "A workflow's state and its steps (state, attempts, output, error, usage).",
			Annotations: &mcp.ToolAnnotations{Title: "Workflow status", ReadOnlyHint: true, OpenWorldHint: hint(false)}}, t.status),
		def(&mcp.Tool{Name: ToolResult, Title: "Workflow result",
			Description: "A workflow and the outputs of its final steps (those nothing depends on): its result once completed.",
			Annotations: &mcp.ToolAnnotations{Title: "Workflow result", ReadOnlyHint: true, OpenWorldHint: hint(false)}}, t.result),
		def(&mcp.Tool{Name: ToolList, Title: "List workflows",
			Description: "Workflows newest first, without their steps, filtered by state and name; a page at a time (limit, and after: the previous page's next_after).",
			Annotations: &mcp.ToolAnnotations{Title: "List workflows", ReadOnlyHint: true, OpenWorldHint: hint(false)}}, t.list),
		def(&mcp.Tool{Name: ToolApprove, Title: "Approve a step",
			Description: "Approve an approval step (approve: in the spec) that waits for a person's decision: the workflow goes on, its dependents read the decision. Refused (not_waiting) if the step does not wait for one.",
			Annotations: &mcp.ToolAnnotations{Title: "Approve a step", DestructiveHint: hint(false), OpenWorldHint: hint(false)}}, t.decide(true)),
		def(&mcp.Tool{Name: ToolReject, Title: "Reject a step",
			Description: "Reject an approval step (approve: in the spec) that waits for a person's decision: the workflow goes on, its dependents read the rejection. Refused (not_waiting) if the step does not wait for one.",
			Annotations: &mcp.ToolAnnotations{Title: "Reject a step", DestructiveHint: hint(false), OpenWorldHint: hint(false)}}, t.decide(false)),
		def(&mcp.Tool{Name: ToolSignal, Title: "Send a signal",
			Description: "Send a signal: every step waiting for it (wait_for: with this name, its match rendering to match) completes with data as its output; if none waits, it is kept for the first that begins waiting. Returns the steps it completed, or kept: true.",
			Annotations: &mcp.ToolAnnotations{Title: "Send a signal", DestructiveHint: hint(false), OpenWorldHint: hint(false)}}, t.signal),
		def(&mcp.Tool{Name: ToolCancel, Title: "Cancel a workflow",
			Description: "Cancel a workflow: its pending steps never run, running ones are stopped. Returns its state afterwards.",
			Annotations: &mcp.ToolAnnotations{Title: "Cancel a workflow", DestructiveHint: hint(true), IdempotentHint: true, OpenWorldHint: hint(false)}}, t.cancel),
	}
}

// submitted is submit_workflow's result: the workflow, whether an
// idempotency key named one submitted before, and how a wait ended.
type submitted struct {
	*producer.Workflow
	Existing bool   `json:"existing"`
	Waited   string `json:"waited,omitempty"` // ended, waiting, blocked, timeout, stopped, busy
	Note     string `json:"note,omitempty"`
}

// specRefused is a spec that does not parse or check.
type specRefused struct{ err error }

func (e *specRefused) Error() string { return e.err.Error() }
func (e *specRefused) Unwrap() error { return e.err }

func (t *tools) submit(ctx context.Context, req *mcp.CallToolRequest, in *SubmitInput) (any, error) {
	if strings.TrimSpace(in.Spec) == "" {
		return nil, badInputf(`argument "spec" is empty: give a workflow spec (YAML or JSON)`)
	}
	var opts []producer.SubmitOption
	if in.IdempotencyKey != "" {
		if err := producer.CheckIdempotencyKey(in.IdempotencyKey); err != nil {
			return nil, badInputf("idempotency_key: %v", err)
		}
		opts = append(opts, producer.WithIdempotencyKey(in.IdempotencyKey))
	}
	if in.Deadline != "" {
		dl, err := time.ParseDuration(in.Deadline)
		if err != nil || dl < time.Second {
			return nil, badInputf("deadline %q: want a duration of at least 1s (10m, 1h30m)", bound(in.Deadline, 64))
		}
		opts = append(opts, producer.WithDeadline(dl))
	}
	if in.Check != nil && !*in.Check {
		opts = append(opts, producer.WithoutWorkerCheck())
	}
	wait := DefaultWait
	switch {
	case in.WaitSeconds < 0:
		return nil, badInputf("wait_seconds: %d is negative", in.WaitSeconds)
	case in.WaitSeconds > 0 && !in.Wait:
		return nil, badInputf("wait_seconds is given without wait: true")
	case time.Duration(in.WaitSeconds)*time.Second > t.o.MaxWait:
		return nil, badInputf("wait_seconds: %d is over this server's bound of %d", in.WaitSeconds, int(t.o.MaxWait.Seconds()))
	case in.WaitSeconds > 0:
		wait = time.Duration(in.WaitSeconds) * time.Second
	}
	wait = min(wait, t.o.MaxWait)
	wspec, err := t.b.Parse("spec", []byte(in.Spec))
	if err != nil {
		return nil, &specRefused{err}
	}
	for _, kv := range in.Input {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, badInputf("input %q: want key=value", bound(kv, 64))
		}
		if wspec.Input == nil {
			wspec.Input = map[string]any{}
		}
		wspec.Input[k] = v
	}
	sub, err := t.b.SubmitWorkflow(ctx, wspec, opts...)
	if err != nil {
		return nil, err
	}
	out := submitted{Existing: sub.Existing}
	if in.Wait {
		out.Workflow, out.Waited, out.Note, err = t.wait(ctx, req, sub.ID, wait)
	} else {
		out.Workflow, err = t.b.Status(ctx, sub.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("workflow %s was submitted, but reading it failed: %w", sub.ID, err)
	}
	return out, nil
}

func (t *tools) status(ctx context.Context, _ *mcp.CallToolRequest, in *IDInput) (any, error) {
	if err := needID(in.ID); err != nil {
		return nil, err
	}
	wf, err := t.b.Status(ctx, in.ID)
	return wf, workflowErr(in.ID, err)
}

func (t *tools) result(ctx context.Context, _ *mcp.CallToolRequest, in *IDInput) (any, error) {
	if err := needID(in.ID); err != nil {
		return nil, err
	}
	res, err := t.b.Result(ctx, in.ID)
	if err != nil {
		return nil, workflowErr(in.ID, err)
	}
	final := res.Final
	if final == nil {
		final = []producer.StepRecord{}
	}
	return map[string]any{"workflow": res.Workflow, "final": final}, nil
}

// maxListLimit is the most workflows list_workflows returns at once (the
// producer's bound).
const maxListLimit = 1000

func (t *tools) list(ctx context.Context, _ *mcp.CallToolRequest, in *ListInput) (any, error) {
	if in.Limit < 0 || in.Limit > maxListLimit {
		return nil, badInputf("limit: %d is not 1 to %d", in.Limit, maxListLimit)
	}
	wfs, err := t.b.ListPage(ctx, producer.ListOptions{State: in.State, Name: in.Name, Limit: in.Limit, After: in.After})
	if err != nil {
		return nil, err
	}
	if wfs == nil {
		wfs = []*producer.Workflow{}
	}
	out := map[string]any{"workflows": wfs}
	limit := in.Limit
	if limit == 0 {
		limit = 50
	}
	if len(wfs) == limit {
		out["next_after"] = wfs[len(wfs)-1].ID
	}
	return out, nil
}

func (t *tools) decide(approve bool) func(context.Context, *mcp.CallToolRequest, *DecisionInput) (any, error) {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in *DecisionInput) (any, error) {
		if err := needID(in.ID); err != nil {
			return nil, err
		}
		if in.Step == "" {
			return nil, badInputf(`argument "step" is empty: name the approval step`)
		}
		state, err := t.b.Decide(ctx, in.ID, in.Step, approve, in.Comment, t.o.By)
		if err != nil {
			return nil, workflowErr(in.ID, err)
		}
		decision := "approved"
		if !approve {
			decision = "rejected"
		}
		return map[string]string{"id": in.ID, "step": in.Step, "decision": decision, "state": state}, nil
	}
}

func (t *tools) signal(ctx context.Context, _ *mcp.CallToolRequest, in *SignalInput) (any, error) {
	var data json.RawMessage
	if in.Data != nil {
		b, err := json.Marshal(in.Data)
		if err != nil {
			return nil, badInputf("data: %v", err)
		}
		data = b
	}
	return t.b.Signal(ctx, producer.Signal{Name: in.Name, Match: in.Match, Data: data, IdempotencyKey: in.IdempotencyKey})
}

func (t *tools) cancel(ctx context.Context, _ *mcp.CallToolRequest, in *IDInput) (any, error) {
	if err := needID(in.ID); err != nil {
		return nil, err
	}
	st, err := t.b.Cancel(ctx, in.ID)
	if err != nil {
		return nil, workflowErr(in.ID, err)
	}
	return map[string]string{"id": in.ID, "state": st}, nil
}

func needID(id string) error {
	if strings.TrimSpace(id) == "" {
		return badInputf(`argument "id" is empty: give a workflow id (wf_…)`)
	}
	return nil
}
