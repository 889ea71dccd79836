package mcpserve

import (
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/problem"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/spec"
)

// maxErrorBytes bounds a tool error's message.
const maxErrorBytes = 4 << 10

// failure is a tool error result: one line of text, and as structured
// content {"error": the line, "code": code} with extra's fields (the codes
// are the JSON API's: docs/mcp-server.md lists them).
func failure(code, msg string, extra map[string]any) *mcp.CallToolResult {
	msg = bound(oneLine(msg), maxErrorBytes)
	sc := map[string]any{"error": msg, "code": code}
	for k, v := range extra {
		sc[k] = v
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}, StructuredContent: sc}
}

// oneLine joins lines with "; ".
func oneLine(s string) string {
	lines := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, "; ")
}

// toolError maps what a call failed with to its tool error: what names
// the workflow (or other thing) the call was about, for a not-found.
func toolError(err error, what string) *mcp.CallToolResult {
	var (
		bi  *badInput
		sr  *specRefused
		ole *producer.OverLimitError
		se  *producer.SubmitError
	)
	switch {
	case errors.As(err, &bi):
		return failure("bad_input", bi.msg, nil)
	case errors.As(err, &sr):
		return invalidSpec(sr.err)
	case errors.Is(err, spec.ErrInvalidSpec):
		return invalidSpec(err)
	case errors.Is(err, producer.ErrNotFound):
		if what == "" {
			return failure("not_found", err.Error()+" (wrong id, or expired after its retention)", nil)
		}
		return failure("not_found", what+" not found (wrong id, or expired after its retention)", nil)
	case errors.Is(err, flow.ErrNotWaiting):
		return failure("not_waiting", err.Error(), nil)
	case errors.Is(err, producer.ErrIdempotencyConflict):
		return failure("idempotency_conflict", err.Error(), nil)
	case errors.Is(err, producer.ErrBadIdempotencyKey):
		return failure("bad_idempotency_key", "idempotency_key: "+err.Error(), nil)
	case errors.Is(err, producer.ErrNoWorkers):
		return failure("no_workers", err.Error()+" (check: false submits anyway: its steps wait until a worker starts)", nil)
	case errors.Is(err, producer.ErrSignalTooLarge):
		return failure("signal_too_large", err.Error(), nil)
	case errors.Is(err, producer.ErrBadSignal):
		return failure("bad_signal", err.Error(), nil)
	case errors.Is(err, producer.ErrUnknownState):
		return failure("unknown_state", err.Error(), nil)
	case errors.As(err, &ole):
		return failure("over_limit", err.Error(), map[string]any{"retry_after_seconds": int(ole.RetryAfter.Seconds())})
	case errors.Is(err, producer.ErrNotConfirmed), flow.Unavailable(err):
		// written or not, the call may be made again: a submit names the
		// idempotency key that makes that safe
		code := "unavailable"
		if errors.Is(err, producer.ErrNotConfirmed) {
			code = "not_confirmed"
		}
		extra := map[string]any{"retry_after_seconds": int(flow.RetryAfter.Seconds())}
		msg := err.Error()
		if errors.As(err, &se) {
			extra["idempotency_key"], extra["workflow"] = se.Key, se.Workflow
			msg = fmt.Sprintf("%s (submit again with idempotency_key %q: it runs workflow %s once either way)", msg, se.Key, se.Workflow)
		}
		return failure(code, msg, extra)
	}
	return failure("internal", err.Error(), nil)
}

// invalidSpec is a refused spec's tool error: its problems (each "spec:LINE:
// where: message") on one line, and as a list.
func invalidSpec(err error) *mcp.CallToolResult {
	lines := []string{}
	for _, e := range problem.Split(err) {
		lines = append(lines, problem.Lines(e)...)
	}
	return failure("invalid_spec", "invalid workflow spec: "+strings.Join(lines, "; "), map[string]any{"problems": lines})
}
