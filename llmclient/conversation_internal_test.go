package llmclient

import (
	"encoding/json"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	openai "github.com/sashabaranov/go-openai"
)

// chaosllm sends only stop and tool_calls / end_turn and tool_use; the
// other reasons are mapped here.
func TestFinishReasonsAreNormalised(t *testing.T) {
	for in, want := range map[openai.FinishReason]string{
		"stop": FinishStop, "tool_calls": FinishToolCalls, "function_call": FinishToolCalls,
		"length": FinishLength, "content_filter": FinishContentFilter, "null": "", "": "", "something_new": "something_new",
	} {
		if got := openAIFinish(in); got != want {
			t.Errorf("openai %q: %q, want %q", in, got, want)
		}
	}
	for in, want := range map[anthropic.StopReason]string{
		"end_turn": FinishStop, "stop_sequence": FinishStop, "tool_use": FinishToolCalls, "max_tokens": FinishLength,
		"model_context_window_exceeded": FinishLength, "refusal": FinishContentFilter, "pause_turn": "pause_turn", "": "",
	} {
		if got := anthropicFinish(in); got != want {
			t.Errorf("anthropic %q: %q, want %q", in, got, want)
		}
	}
}

// Arguments a model sent that are not JSON still make a request body (the
// provider may refuse it; the SDK must not fail to encode it).
func TestToolInputIsAlwaysEncodable(t *testing.T) {
	for args, want := range map[string]string{"": `{}`, `{"a":1}`: `{"a":1}`, `{"a":`: `"{\"a\":"`} {
		b, err := json.Marshal(toolInput(args))
		if err != nil || string(b) != want {
			t.Errorf("%q: %s %v, want %s", args, b, err, want)
		}
	}
}
