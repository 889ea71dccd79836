package router

import (
	"fmt"

	"github.com/agentq/agentq/llmclient"

	"github.com/agentq/agentq/redact"
	"github.com/agentq/agentq/retry"
)

// InvalidOutputError is an answer that arrived but failed the request's
// Output check. Its class is invalid_output.
type InvalidOutputError struct {
	Target string // provider/model
	Err    error  // what the check said
	Output string // the answer as it came
}

// outputExcerpt bounds how much of a bad answer an error message carries
// (the dead-letter list shows it for review).
const outputExcerpt = 1000

func (e *InvalidOutputError) Error() string {
	return fmt.Sprintf("%s: invalid output: %v; the answer was: %q", e.Target, e.Err, (*redact.Redactor)(nil).Truncate(e.Output, outputExcerpt))
}

// Unwrap returns the check's error.
func (e *InvalidOutputError) Unwrap() error { return e.Err }

// Class is invalid_output.
func (e *InvalidOutputError) Class() retry.Class { return retry.InvalidOutput }

// OutputTooLargeError is an answer longer than the request's
// MaxOutputBytes. Its class is output_too_large.
type OutputTooLargeError struct {
	Target string // provider/model
	Bytes  int    // the answer's length
	Limit  int    // Request.MaxOutputBytes
}

func (e *OutputTooLargeError) Error() string {
	return fmt.Sprintf("%s: the answer is %d bytes, over the step's %d-byte output limit (limits.max_output_bytes); it is not cut to fit",
		e.Target, e.Bytes, e.Limit)
}

// Class is output_too_large.
func (e *OutputTooLargeError) Class() retry.Class { return retry.OutputTooLarge }

// checkOutput runs the request's checks on a plain answer: its length,
// then its JSON. A stream is checked by whoever reads it; an answer made
// of tool calls is the model's move, not a JSON answer.
func checkOutput(req llmclient.Request, resp *answer, target string) error {
	if resp.stream != nil {
		return nil
	}
	if req.MaxOutputBytes > 0 && len(resp.Text) > req.MaxOutputBytes {
		return &OutputTooLargeError{Target: target, Bytes: len(resp.Text), Limit: req.MaxOutputBytes}
	}
	if req.Output == nil || req.Output.Check == nil || len(resp.ToolCalls) > 0 {
		return nil
	}
	if err := req.Output.Check(resp.Text); err != nil {
		return &InvalidOutputError{Target: target, Err: err, Output: resp.Text}
	}
	return nil
}

// repairRequest is req with the invalid answer and what was wrong with it
// appended, asking for the answer again.
func repairRequest(req ask, inv *InvalidOutputError) ask {
	msgs := make([]llmclient.Message, 0, len(req.Messages)+2)
	msgs = append(msgs, req.Messages...)
	msgs = append(msgs,
		llmclient.Message{Role: "assistant", Content: inv.Output},
		llmclient.Message{Role: "user", Content: "That answer is not valid: " + oneLine(inv.Err.Error(), 2000) +
			". Answer again with only the JSON document, no other text" + schemaHint(req) + "."})
	req.Messages = msgs
	return req
}

func schemaHint(req ask) string {
	if req.Output.Schema == nil {
		return ""
	}
	return ", matching the JSON Schema you were given"
}
