package agentq

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentq/agentq/internal/engine"
)

// ToolFunc is a tool the model may call from a prompt step that offers it
// (tools: [NAME] in the spec). args are the call's arguments, already
// checked against the tool's schema. What it returns goes back to the
// model: a string as it is, anything else as JSON. An error goes back as
// an error result, for the model to work around, unless it is a
// FatalToolError; a panic is recovered into an error result.
type ToolFunc func(ctx context.Context, args json.RawMessage) (any, error)

// ToolCallRecord is one tool call of a step's conversation, as the step's
// ToolCalls (a JSON list of these) keeps it.
type ToolCallRecord = engine.ToolCallRecord

// FatalToolError, returned by a tool, ends the step's conversation and
// dead-letters the step with err as its reason, instead of telling the
// model.
func FatalToolError(err error) error { return engine.FatalToolError(err) }

// Tool registers fn as the tool name, whose arguments schema (a JSON
// Schema of type object, self-contained) describes; the schema's
// "description", if any, tells the model what the tool does. Every call
// the model makes is checked against the schema first; a call that does
// not match gets an error result without running fn. A prompt step's
// conversation runs until the model answers with text, at most the step's
// max_turns model calls, every turn kept durably: a retried step replays
// the turns and results it had. A bad name or schema, a nil fn, a
// repeated name or a registration after Run is reported by Run.
func (w *Worker) Tool(name string, schema json.RawMessage, fn func(ctx context.Context, args json.RawMessage) (any, error)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := engine.Tool{Schema: append(json.RawMessage(nil), schema...), Func: fn}
	switch {
	case w.running:
		w.errs = append(w.errs, fmt.Errorf("Tool(%q): the worker is already running", name))
	case w.tools[name].Func != nil:
		w.errs = append(w.errs, fmt.Errorf("Tool(%q): registered twice", name))
	default:
		if err := engine.CheckTool(name, t); err != nil {
			w.errs = append(w.errs, fmt.Errorf("Tool(%q): %w", name, err))
			return
		}
		if w.tools == nil {
			w.tools = map[string]engine.Tool{}
		}
		w.tools[name] = t
	}
}
