package chaosllm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// contentText reads a message's content: a string or a list of blocks.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &blocks)
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl.Text)
	}
	return b.String()
}

// anthropicMessage reads one message: its text, and its tool_use blocks
// (an assistant message) or tool_result blocks (a user message).
func anthropicMessage(role string, raw json.RawMessage) (string, message, error) {
	m := message{role: role}
	if len(raw) == 0 || string(raw) == "null" {
		return "", m, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, m, nil
	}
	var blocks []struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		ID        string          `json:"id"`
		ToolUseID string          `json:"tool_use_id"`
		IsError   bool            `json:"is_error"`
		Content   json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", m, errors.New("content is not a string or a list of content blocks")
	}
	var text strings.Builder
	for j, b := range blocks {
		switch b.Type {
		case "tool_use":
			if role != "assistant" || b.ID == "" {
				return "", m, fmt.Errorf("content[%d]: a tool_use block needs an id and belongs in an assistant message", j)
			}
			m.calls = append(m.calls, b.ID)
		case "tool_result":
			if role != "user" || b.ToolUseID == "" {
				return "", m, fmt.Errorf("content[%d]: a tool_result block needs a tool_use_id and belongs in a user message", j)
			}
			m.results = append(m.results, toolResult{id: b.ToolUseID, content: contentText(b.Content), isError: b.IsError})
		default:
			text.WriteString(b.Text)
		}
	}
	return text.String(), m, nil
}

var anthropicDialect = &dialect{
	name: "anthropic",
	parse: func(body []byte) (request, error) {
		var req struct {
			Model     string `json:"model"`
			MaxTokens int    `json:"max_tokens"`
			Messages  []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
			Stream       bool `json:"stream"`
			OutputConfig *struct {
				Format *struct {
					Type   string         `json:"type"`
					Schema map[string]any `json:"schema"`
				} `json:"format"`
			} `json:"output_config"`
			Tools []struct {
				Name        string         `json:"name"`
				InputSchema map[string]any `json:"input_schema"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(body, &req); err != nil || req.Model == "" || req.MaxTokens <= 0 {
			return request{}, errors.New("request body is not a messages request (model and max_tokens are required)")
		}
		parts := make([]string, len(req.Messages))
		msgs := make([]message, len(req.Messages))
		for i, m := range req.Messages {
			var err error
			if parts[i], msgs[i], err = anthropicMessage(m.Role, m.Content); err != nil {
				return request{}, fmt.Errorf("messages[%d]: %w", i, err)
			}
		}
		r := request{model: req.Model, prompt: promptOf(parts), stream: req.Stream}
		for _, t := range req.Tools {
			r.tools = append(r.tools, offeredTool{t.Name, t.InputSchema})
		}
		r.toolTalk = len(r.tools) > 0
		if err := r.readConversation(msgs, true); err != nil {
			return request{}, err
		}
		if c := req.OutputConfig; c != nil && c.Format != nil && c.Format.Type == "json_schema" {
			r.json, r.schema = true, c.Format.Schema
		}
		return r, nil
	},
	errorBody: func(_ int, typ, _ string, msg string) any {
		return map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}}
	},
	kinds: func(status int, code string) (string, string) {
		switch status {
		case 400, 422:
			return "invalid_request_error", code
		case 401:
			return "authentication_error", code
		case 402:
			return "billing_error", code
		case 403:
			return "permission_error", code
		case 404:
			return "not_found_error", code
		case 413:
			return "request_too_large", code
		case 429:
			return "rate_limit_error", code
		case 529:
			return "overloaded_error", code
		default:
			return "api_error", code
		}
	},
	answer: func(w http.ResponseWriter, id, model, text string, in, out int) {
		writeJSON(w, http.StatusOK, anthropicAnswer{ID: id, Type: "message", Role: "assistant", Model: model,
			Content: []anthropicText{{Type: "text", Text: text}}, StopReason: "end_turn",
			Usage: anthropicUsage{InputTokens: in, OutputTokens: out}})
	},
	toolAnswer: func(w http.ResponseWriter, id, model, text string, calls []toolCall, in, out int) {
		var content []any
		if text != "" {
			content = append(content, map[string]string{"type": "text", "text": text})
		}
		for _, c := range calls {
			content = append(content, map[string]any{"type": "tool_use", "id": "toolu_" + c.id, "name": c.name, "input": json.RawMessage(c.args)})
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": model,
			"content":     content,
			"stop_reason": "tool_use", "stop_sequence": nil,
			"usage": map[string]int{"input_tokens": in, "output_tokens": out},
		})
	},
	stream: func(w http.ResponseWriter, id, model string, in int) (func(string), func(int)) {
		w.Header().Set("Content-Type", "text/event-stream")
		sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
			"stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": in, "output_tokens": 1}}})
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]string{"type": "text", "text": ""}})
		return func(c string) {
				sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "text_delta", "text": c}})
			}, func(out int) {
				sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
				sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": map[string]int{"output_tokens": out}})
				sse(w, "message_stop", map[string]any{"type": "message_stop"})
			}
	},
	toolStream: func(w http.ResponseWriter, id, model, text string, calls []toolCall, in, out int) {
		w.Header().Set("Content-Type", "text/event-stream")
		sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
			"stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": in, "output_tokens": 1}}})
		n := 0
		if text != "" {
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]string{"type": "text", "text": ""}})
			for _, c := range chunks(text) {
				sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "text_delta", "text": c}})
			}
			sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
			n++
		}
		for _, c := range calls {
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": n,
				"content_block": map[string]any{"type": "tool_use", "id": "toolu_" + c.id, "name": c.name, "input": map[string]any{}}})
			half := len(c.args) / 2
			for _, part := range []string{c.args[:half], c.args[half:]} {
				sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": n, "delta": map[string]string{"type": "input_json_delta", "partial_json": part}})
			}
			sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": n})
			n++
		}
		sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "tool_use", "stop_sequence": nil}, "usage": map[string]int{"output_tokens": out}})
		sse(w, "message_stop", map[string]any{"type": "message_stop"})
	},
	streamError: func(w http.ResponseWriter, typ, msg string) {
		sse(w, "error", map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
	},
	authError: func(string) (int, any) {
		return http.StatusUnauthorized, map[string]any{"type": "error", "error": map[string]string{"type": "authentication_error", "message": "invalid x-api-key"}}
	},
}

func (s *Server) anthropic(w http.ResponseWriter, r *http.Request) { s.serve(anthropicDialect, w, r) }

// anthropicAnswer is a plain answer's body: a struct, not maps, for what
// every answered call costs the server to encode.
type anthropicAnswer struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"`
	Role         string          `json:"role"`
	Model        string          `json:"model"`
	Content      []anthropicText `json:"content"`
	StopReason   string          `json:"stop_reason"`
	StopSequence *string         `json:"stop_sequence"` // always null
	Usage        anthropicUsage  `json:"usage"`
}

type anthropicText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthropicUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}
