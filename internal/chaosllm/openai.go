package chaosllm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

var openAIDialect = &dialect{
	name: "openai",
	parse: func(body []byte) (request, error) {
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Content string `json:"content"`
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
		for i, m := range req.Messages {
			parts[i] = m.Content
		}
		r := request{model: req.Model, prompt: promptOf(parts), stream: req.Stream}
		if len(req.Tools) > 0 {
			r.tool, r.toolSchema = req.Tools[0].Function.Name, req.Tools[0].Function.Parameters
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
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": 1, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": map[string]string{"role": "assistant", "content": text}, "finish_reason": "stop"}},
			"usage":   map[string]int{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out},
		})
	},
	toolAnswer: func(w http.ResponseWriter, id, model, tool, args string, in, out int) {
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": 1, "model": model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{
				"role": "assistant", "content": nil,
				"tool_calls": []any{map[string]any{"id": "call_" + id, "type": "function",
					"function": map[string]string{"name": tool, "arguments": args}}}}}},
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
	streamError: func(w http.ResponseWriter, typ, msg string) {
		sse(w, "", map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
	},
	authError: func(key string) (int, any) {
		return http.StatusUnauthorized, map[string]any{"error": map[string]any{"message": "Incorrect API key provided: " + key + ". You can find your API key in your account settings.", "type": "invalid_request_error", "param": nil, "code": "invalid_api_key"}}
	},
}

func (s *Server) openAI(w http.ResponseWriter, r *http.Request) { s.serve(openAIDialect, w, r) }
