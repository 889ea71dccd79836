package llmclient

import (
	"encoding/json"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	openai "github.com/sashabaranov/go-openai"
)

// Roles of a conversation's messages.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	// RoleTool is a tool result: ToolCallID, Content and IsError.
	RoleTool = "tool"
)

// Why the model stopped (Response.FinishReason), the same on both
// dialects. A reason neither maps is passed through as the provider said
// it (Anthropic's "pause_turn", for one); empty: the provider did not say.
const (
	FinishStop          = "stop"           // a final answer (OpenAI stop; Anthropic end_turn, stop_sequence)
	FinishToolCalls     = "tool_calls"     // the model called tools (OpenAI tool_calls, function_call; Anthropic tool_use)
	FinishLength        = "length"         // cut at max tokens or the context window (OpenAI length; Anthropic max_tokens, model_context_window_exceeded)
	FinishContentFilter = "content_filter" // withheld (OpenAI content_filter; Anthropic refusal)
)

// openAIErrorPrefix starts an error result's content on the OpenAI wire,
// which has no field to flag one.
const openAIErrorPrefix = "error: "

// openAIEmptyResult is sent for an empty tool result: go-openai omits an
// empty content, and OpenAI refuses a tool message without one.
const openAIEmptyResult = "(empty)"

// ToolResultMessage is the result of the tool call callID, to append to
// the conversation after the assistant turn that made the call. isError
// says the tool failed and content is its error.
func ToolResultMessage(callID, content string, isError bool) Message {
	return Message{Role: RoleTool, ToolCallID: callID, Content: content, IsError: isError}
}

// AssistantMessage is the model's turn as the next request must carry it:
// its text and its tool calls.
func (r *Response) AssistantMessage() Message {
	return Message{Role: RoleAssistant, Content: r.Text, ToolCalls: append([]ToolCall(nil), r.ToolCalls...)}
}

// openAIMessages translates a conversation: an assistant turn with
// tool_calls, then one role "tool" message per result.
func openAIMessages(msgs []Message) []openai.ChatCompletionMessage {
	out := make([]openai.ChatCompletionMessage, 0, len(msgs))
	for _, m := range msgs {
		om := openai.ChatCompletionMessage{Role: m.Role, Content: m.Content}
		switch {
		case m.Role == RoleTool:
			om.ToolCallID = m.ToolCallID
			if m.IsError {
				om.Content = openAIErrorPrefix + m.Content
			} else if m.Content == "" {
				om.Content = openAIEmptyResult
			}
		case len(m.ToolCalls) > 0:
			for _, c := range m.ToolCalls {
				args := c.Arguments
				if args == "" {
					args = "{}"
				}
				om.ToolCalls = append(om.ToolCalls, openai.ToolCall{ID: c.ID, Type: openai.ToolTypeFunction,
					Function: openai.FunctionCall{Name: c.Name, Arguments: args}})
			}
		}
		out = append(out, om)
	}
	return out
}

// anthropicMessages translates a conversation: an assistant turn is its
// text and tool_use blocks; consecutive tool results are the tool_result
// blocks of one user message, as Anthropic requires.
func anthropicMessages(msgs []Message) []anthropic.MessageParam {
	out := make([]anthropic.MessageParam, 0, len(msgs))
	var results []anthropic.ContentBlockParamUnion
	flush := func() {
		if len(results) > 0 {
			out = append(out, anthropic.NewUserMessage(results...))
			results = nil
		}
	}
	for _, m := range msgs {
		if m.Role == RoleTool {
			results = append(results, toolResultBlock(m))
			continue
		}
		flush()
		switch {
		case m.Role == RoleAssistant && len(m.ToolCalls) > 0:
			var blocks []anthropic.ContentBlockParamUnion
			if m.Content != "" { // Anthropic refuses an empty text block
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for _, c := range m.ToolCalls {
				blocks = append(blocks, anthropic.NewToolUseBlock(c.ID, toolInput(c.Arguments), c.Name))
			}
			out = append(out, anthropic.NewAssistantMessage(blocks...))
		case m.Role == RoleAssistant:
			out = append(out, anthropic.NewAssistantMessage(anthropic.NewTextBlock(m.Content)))
		default:
			out = append(out, anthropic.NewUserMessage(anthropic.NewTextBlock(m.Content)))
		}
	}
	flush()
	return out
}

func toolResultBlock(m Message) anthropic.ContentBlockParamUnion {
	b := anthropic.ToolResultBlockParam{ToolUseID: m.ToolCallID}
	if m.IsError {
		b.IsError = anthropic.Bool(true)
	}
	if m.Content != "" { // an empty result has no content (an empty text block is refused)
		b.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: m.Content}}}
	}
	return anthropic.ContentBlockParamUnion{OfToolResult: &b}
}

// toolInput is a call's arguments as a tool_use input: the JSON itself,
// {} for none, and text that is not JSON (which only a broken model sends)
// as a JSON string, which Anthropic refuses as a bad request.
func toolInput(args string) any {
	switch {
	case args == "":
		return json.RawMessage("{}")
	case json.Valid([]byte(args)):
		return json.RawMessage(args)
	}
	return args
}

// openAIFinish normalises an OpenAI finish_reason.
func openAIFinish(r openai.FinishReason) string {
	switch r {
	case openai.FinishReasonFunctionCall:
		return FinishToolCalls
	case openai.FinishReasonNull:
		return ""
	}
	return string(r)
}

// anthropicFinish normalises an Anthropic stop_reason.
func anthropicFinish(r anthropic.StopReason) string {
	switch r {
	case anthropic.StopReasonEndTurn, anthropic.StopReasonStopSequence:
		return FinishStop
	case anthropic.StopReasonToolUse:
		return FinishToolCalls
	case anthropic.StopReasonMaxTokens, anthropic.StopReasonModelContextWindowExceeded:
		return FinishLength
	case anthropic.StopReasonRefusal:
		return FinishContentFilter
	}
	return string(r)
}
