// Package llmclient talks to LLM providers, and is useful on its own. A
// Provider (NewProvider, one per dialect in Dialects) sends one chat
// request with one of its API keys (WithKey picks it), bounds the answer
// it reads, notices a stalled stream, reads Retry-After, and fails with a
// classified *Error that never carries a key (retry.ClassOf reads its
// class). It never retries on its own: the caller (agentq's router, and
// above it the task queue) owns every retry decision.
package llmclient

import (
	"context"
	"time"
)

// Message is one turn of a conversation: a Role and its Content. A tool
// conversation holds two more kinds:
//
//   - an assistant turn that called tools: Role "assistant", the calls in
//     ToolCalls (as Response.ToolCalls gave them) and its text, if any, in
//     Content (Response.AssistantMessage builds it);
//   - a tool result: Role "tool", the call's ID in ToolCallID, the result
//     in Content and IsError set when the tool failed (ToolResultMessage
//     builds it). Results follow the assistant turn whose calls they
//     answer, one message per call.
//
// On the OpenAI wire an assistant turn carries tool_calls and each result
// is a role "tool" message with tool_call_id; OpenAI has no error flag, so
// an error result's content is sent after "error: " (and an empty result
// as "(empty)", as OpenAI wants content). On the Anthropic wire an
// assistant turn is a text block (when there is text) and tool_use blocks,
// and consecutive results are the tool_result blocks of one user message,
// with is_error set for errors.
type Message struct {
	Role    string `json:"role"` // "user", "assistant" or "tool"
	Content string `json:"content"`
	// ToolCalls are the calls an assistant turn made.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is the ID of the call a tool message is the result of.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// IsError says a tool message's Content is the error the call ended with.
	IsError bool `json:"is_error,omitempty"`
}

// Request is one chat call. Model names the provider's model; System is the
// optional system prompt.
type Request struct {
	Model     string
	System    string
	Messages  []Message
	MaxTokens int // zero means DefaultMaxTokens

	// StallTimeout is used by ChatStream only: when no chunk arrives for this
	// long the stream fails with a timeout error, which tells a stalled
	// stream from a slow one. Zero disables the check.
	StallTimeout time.Duration

	// Temperature, when set, is sent as is; nil leaves the provider's default.
	Temperature *float64
	// Tools are function definitions passed through to the model; the
	// calls it makes come back in Response.ToolCalls.
	Tools []Tool
	// Output, when set, asks for JSON by the provider's native mechanism
	// and has the router check every answer (Router.Chat).
	Output *Output
	// MaxOutputBytes, when positive, is the longest answer text the caller
	// keeps: a longer one is an OutputTooLargeError (class
	// output_too_large) and the route moves on to its next target. Never
	// sent to the provider (MaxTokens bounds what it writes).
	MaxOutputBytes int
}

// Output asks for a JSON answer.
type Output struct {
	// Schema is the JSON Schema the answer must match, sent to the
	// provider (OpenAI response_format json_schema, Anthropic
	// output_config); nil asks for any JSON object (OpenAI json_object;
	// Anthropic has no schema-less mode, so only Check holds it there).
	Schema map[string]any
	// Name is the schema's name for OpenAI; empty: "output".
	Name string
	// Check validates an answer's text; an error makes the answer
	// invalid_output (one repair on the same target, then the next). Nil:
	// no check.
	Check func(text string) error `json:"-"` // not part of what is asked (a durable call hashes the request)
}

// Tool is a function the model may call.
type Tool struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters,omitempty"` // JSON Schema of the arguments
}

// ToolCall is a call the model made.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // JSON
}

// DefaultMaxTokens is sent when Request.MaxTokens is zero (Anthropic requires
// the field; OpenAI-compatible servers accept it).
const DefaultMaxTokens = 1024

// Usage counts tokens as the provider reported them.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// Response is a finished chat call.
type Response struct {
	Text      string        `json:"text"`
	Usage     Usage         `json:"usage"`
	Provider  string        `json:"provider"`
	Model     string        `json:"model"`
	Key       string        `json:"key"` // the key's fingerprint, never the key
	Latency   time.Duration `json:"latency"`
	RequestID string        `json:"request_id,omitempty"`
	// ToolCalls are the tool calls the model made, if any. A streamed
	// answer never has any: ChatStream reads text only (a conversation
	// with tool turns can be sent to it, but ask for a turn that may call
	// tools with Chat).
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// FinishReason is why the model stopped, the same on both dialects:
	// FinishStop, FinishToolCalls, FinishLength, FinishContentFilter, or
	// the provider's own word for anything else; empty if it said nothing.
	FinishReason string `json:"finish_reason,omitempty"`
	// ResponseModel is the model the provider says answered (it may name
	// a version of Model), redacted and bounded as every text a provider
	// sends; empty when it said none (a stream).
	ResponseModel string `json:"response_model,omitempty"`
}

// Provider is one configured LLM endpoint.
type Provider interface {
	// Name is the provider's configured name.
	Name() string
	// Chat sends req and waits for the whole answer.
	Chat(ctx context.Context, req Request) (*Response, error)
	// ChatStream sends req and returns the answer as it is generated:
	// its text only, tool calls in a streamed answer are not read.
	ChatStream(ctx context.Context, req Request) (*Stream, error)
}

func (r Request) maxTokens() int {
	if r.MaxTokens > 0 {
		return r.MaxTokens
	}
	return DefaultMaxTokens
}
