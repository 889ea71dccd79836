package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// mcpCallError is an MCP server's failure that ends the attempt: its text
// redacted (it is recorded with the step), its class its cause's.
type mcpCallError struct {
	msg   string
	cause error
}

func (e *mcpCallError) Error() string { return e.msg }
func (e *mcpCallError) Unwrap() error { return e.cause }

// mcpExecute calls a tool an MCP server runs. What the tool answers, its
// own failure (isError) included, goes back to the model, scrubbed of the
// configuration's secrets, as does a result over the step's output limit
// (as an error result). The server's failures (not started, not reached,
// timed out, a protocol error) end the attempt with their class; a
// side-effect call whose outcome they leave unknown is held for review
// (unsettledCall).
func (l *toolLoop) mcpExecute(ctx context.Context, turn int, c llmclient.ToolCall, b *mcpBinding, args json.RawMessage, seq int, hash string) (toolResult, error) {
	var started func(context.Context) error
	var began atomic.Bool
	if b.sideEffects {
		started = func(callCtx context.Context) error {
			mark, _ := json.Marshal(toolResult{Started: l.d.attempt})
			if err := l.d.keep(callCtx, seq, hash, mark); err != nil {
				var nc *markNotConfirmed
				if errors.As(err, &nc) {
					// not made: released, so the next attempt makes it
					// (unless a promotion kept the mark and lost this:
					// then it holds the step for review)
					release, _ := json.Marshal(toolResult{Started: l.d.attempt, Held: l.d.attempt})
					kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
					_ = l.d.save(kctx, seq, hash, release)
					cancel()
				}
				return err
			}
			began.Store(true)
			return nil
		}
	}
	res, err := l.mcp.Call(ctx, b.server, b.tool, args, started)
	if err != nil {
		msg := l.redact(err.Error())
		failed := toolResult{Content: msg, IsError: true}
		switch {
		case began.Load() && retry.ClassOf(err) != retry.BadRequest:
			return failed, &unsettledCall{ref: b.ref(), id: c.ID, turn: turn, why: "its outcome is unknown: " + msg}
		case began.Load():
			// the server answered (a protocol error): known, and the step
			// ends; its mark says a requeue may run the call again
			mark, _ := json.Marshal(toolResult{Started: l.d.attempt, Held: l.d.attempt})
			kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
			if kerr := l.d.keep(kctx, seq, hash, mark); kerr != nil {
				l.log.Warn("side-effect call's mark not released: a requeue holds it", "err", kerr.Error())
			}
			cancel()
		}
		return failed, &mcpCallError{msg: fmt.Sprintf("tool %s (turn %d, call %s): %s", b.ref(), turn, c.ID, msg), cause: err}
	}
	content := l.redact(res.Content)
	if len(content) > l.maxBytes {
		return toolResult{Content: fmt.Sprintf("the result of %s is %d bytes, over the %d-byte limit (limits.max_output_bytes)", c.Name, len(content), l.maxBytes), IsError: true}, nil
	}
	return toolResult{Content: strings.ToValidUTF8(content, "\uFFFD"), IsError: res.IsError}, nil
}

// refs are calls as the event log names them: an MCP server's tool as
// mcp:SERVER/TOOL (the server's name in every tool.turn), any other by the
// name the model called.
func (l *toolLoop) refs(calls []llmclient.ToolCall) []llmclient.ToolCall {
	var out []llmclient.ToolCall
	for i, c := range calls {
		if t := l.tools[c.Name]; t != nil && t.mcp != nil {
			if out == nil {
				out = append([]llmclient.ToolCall(nil), calls...)
			}
			out[i].Name = t.mcp.ref()
		}
	}
	if out == nil {
		return calls
	}
	return out
}
