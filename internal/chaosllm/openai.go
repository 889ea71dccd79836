package chaosllm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

var openAIDialect = &dialect{
	name: "openai",
	parse: func(body []byte) (request, error) {
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role      string          `json:"role"`
				Content   json.RawMessage `json:"content"`
				ToolCalls []struct {
					ID string `json:"id"`
				} `json:"tool_calls"`
				ToolCallID string `json:"tool_call_id"`
			} `json:"messages"`
			Stream         bool `json:"stream"`
			ResponseFormat *struct {
				Type       string `json:"type"`
				JSONSchema *struct {
					Schema map[string]any `json:"schema"`
				} `json:"json_schema"`
			} `json:"response_format"`
			Tools []struct {
				Function struct {
					Name       string         `json:"name"`
					Parameters map[string]any `json:"parameters"`
				} `json:"function"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(body, &req); err != nil || req.Model == "" {
			return request{}, errors.New("request body is not a chat completion request")
		}
		parts := make([]string, len(req.Messages))
		msgs := make([]message, len(req.Messages))
		for i, m := range req.Messages {
			text, err := openAIContent(m.Content)
			if err != nil {
				return request{}, fmt.Errorf("messages[%d].content: %w", i, err)
			}
			msgs[i].role = m.Role
			switch {
			case m.Role == "tool":
				if m.ToolCallID == "" || len(m.Content) == 0 || string(m.Content) == "null" {
					return request{}, fmt.Errorf("messages[%d]: a tool message needs a tool_call_id and content", i)
				}
				content, isErr := openAIErrorResult(text)
				msgs[i].results = []toolResult{{id: m.ToolCallID, content: content, isError: isErr}}
				continue // a result is not prompt text
			case len(m.ToolCalls) > 0 && m.Role != "assistant":
				return request{}, fmt.Errorf("messages[%d]: only an assistant message has tool_calls", i)
			}
			for _, c := range m.ToolCalls {
				if c.ID == "" {
					return request{}, fmt.Errorf("messages[%d].tool_calls: a call needs an id", i)
				}
				msgs[i].calls = append(msgs[i].calls, c.ID)
			}
			parts[i] = text
		}
		r := request{model: req.Model, prompt: promptOf(parts), stream: req.Stream}
		for _, t := range req.Tools {
			r.tools = append(r.tools, offeredTool{t.Function.Name, t.Function.Parameters})
		}
		r.toolTalk = len(r.tools) > 0
		if err := r.readConversation(msgs, false); err != nil {
			return request{}, err
		}
		if f := req.ResponseFormat; f != nil && (f.Type == "json_object" || f.Type == "json_schema") {
			r.json = true
			if f.JSONSchema != nil {
				r.schema = f.JSONSchema.Schema
			}
		}
		return r, nil
	},
	errorBody: func(_ int, typ, code, msg string) any {
		var c any
		if code != "" {
			c = code
		}
		return map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}}
	},
	kinds: func(status int, code string) (string, string) {
		switch {
		case status == 429 && code == "insufficient_quota":
			return "insufficient_quota", code
		case status == 429:
			return "requests", "rate_limit_exceeded"
		case status == 401:
			return "invalid_request_error", "invalid_api_key"
		case status == 404:
			return "invalid_request_error", "model_not_found"
		case status == 400 || status == 422:
			return "invalid_request_error", code
		default:
			return "server_error", code
		}
	},
	answer: func(w http.ResponseWriter, id, model, text string, in, out int) {
		writeJSON(w, http.StatusOK, openAICompletion{ID: id, Object: "chat.completion", Created: 1, Model: model,
			Choices: []openAIChoice{{Message: openAIMessage{Role: "assistant", Content: text}, FinishReason: "stop"}},
			Usage:   openAIUsage{PromptTokens: in, CompletionTokens: out, TotalTokens: in + out}})
	},
	toolAnswer: func(w http.ResponseWriter, id, model, text string, calls []toolCall, in, out int) {
		var content any // null without text
		if text != "" {
			content = text
		}
		tcs := make([]any, len(calls))
		for i, c := range calls {
			tcs[i] = map[string]any{"id": "call_" + c.id, "type": "function",
				"function": map[string]string{"name": c.name, "arguments": c.args}}
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": 1, "model": model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{
				"role": "assistant", "content": content, "tool_calls": tcs}}},
			"usage": map[string]int{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out},
		})
	},
	stream: func(w http.ResponseWriter, id, model string, in int) (func(string), func(int)) {
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta map[string]string, finish any) map[string]any {
			return map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1, "model": model,
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		}
		sse(w, "", chunk(map[string]string{"role": "assistant", "content": ""}, nil))
		return func(c string) { sse(w, "", chunk(map[string]string{"content": c}, nil)) },
			func(out int) {
				sse(w, "", chunk(map[string]string{}, "stop"))
				sse(w, "", map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1, "model": model, "choices": []any{},
					"usage": map[string]int{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out}})
				fmt.Fprint(w, "data: [DONE]\n\n")
			}
	},
	toolStream: func(w http.ResponseWriter, id, model, text string, calls []toolCall, in, out int) {
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta map[string]any, finish any) map[string]any {
			return map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1, "model": model,
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		}
		sse(w, "", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
		for _, c := range chunks(text) {
			sse(w, "", chunk(map[string]any{"content": c}, nil))
		}
		for i, c := range calls {
			half := len(c.args) / 2
			sse(w, "", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": "call_" + c.id, "type": "function",
				"function": map[string]string{"name": c.name, "arguments": c.args[:half]}}}}, nil))
			sse(w, "", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]string{"arguments": c.args[half:]}}}}, nil))
		}
		sse(w, "", chunk(map[string]any{}, "tool_calls"))
		sse(w, "", map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1, "model": model, "choices": []any{},
			"usage": map[string]int{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out}})
		fmt.Fprint(w, "data: [DONE]\n\n")
	},
	streamError: func(w http.ResponseWriter, typ, msg string) {
		sse(w, "", map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
	},
	authError: func(key string) (int, any) {
		return http.StatusUnauthorized, map[string]any{"error": map[string]any{"message": "Incorrect API key provided: " + key + ". You can find your API key in your account settings.", "type": "invalid_request_error", "param": nil, "code": "invalid_api_key"}}
	},
}

// openAICompletion is a plain answer's body: a struct, not maps, for
// what every answered call costs the server to encode.
type openAICompletion struct {
	ID      string         `json:"id"`
	Object  string         `json:"object"`
	Created int            `json:"created"`
	Model   string         `json:"model"`
	Choices []openAIChoice `json:"choices"`
	Usage   openAIUsage    `json:"usage"`
}

type openAIChoice struct {
	Index        int           `json:"index"`
	Message      openAIMessage `json:"message"`
	FinishReason string        `json:"finish_reason"`
}

type openAIMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type openAIUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func (s *Server) openAI(w http.ResponseWriter, r *http.Request) { s.serve(openAIDialect, w, r) }

// openAIContent reads a message's content: a string, null, or a list of
// parts (their text joined).
func openAIContent(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("not a string or a list of parts")
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), nil
}
