package agentq

import "github.com/agentq/agentq/llmclient"

// What a code step sends the model and gets back (s.LLM().Chat): the same
// types as the router's, so a step imports nothing but agentq.
type (
	// Request is one call: its messages, system text, max tokens,
	// temperature, tools and JSON output.
	Request = llmclient.Request
	// Message is one turn of a conversation.
	Message = llmclient.Message
	// Response is the model's answer: its text, usage, the target that
	// answered and any tool calls; its AssistantMessage is the model's
	// turn as the next request carries it.
	Response = llmclient.Response
	// Usage counts a call's tokens.
	Usage = llmclient.Usage
	// Output asks for a JSON answer, with a schema and a check.
	Output = llmclient.Output
)
