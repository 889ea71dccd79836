package chaosllm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

type openAIRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	Stream bool `json:"stream"`
}

func (s *Server) openAI(w http.ResponseWriter, r *http.Request) {
	const ep = "openai"
	key := keyOf(r)
	var req openAIRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&req); err != nil || req.Model == "" {
		s.count(ep, key, "bad_request")
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "request body is not a chat completion request")
		return
	}
	if !s.keyAccepted(key) {
		s.count(ep, key, "unauthorized")
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.")
		return
	}
	d := s.decide(ep)
	if !wait(r, d.latency) {
		s.count(ep, key, "client_gone")
		return
	}
	id := s.nextID(ep)
	w.Header().Set("x-request-id", id)
	if f := d.fault; f != nil {
		s.count(ep, key, fmt.Sprintf("status_%d", f.Status))
		setRetryAfter(w, f.RetryAfter)
		typ, code := f.Type, f.Code
		if typ == "" {
			typ, code = openAIKind(f.Status, code)
		}
		openAIError(w, f.Status, typ, code, fmt.Sprintf("chaosllm: scripted %d in phase %q", f.Status, d.phase))
		return
	}
	var prompt strings.Builder
	for _, m := range req.Messages {
		prompt.WriteString(m.Content)
		prompt.WriteString("\n")
	}
	text := Reply(prompt.String())
	usage := map[string]int{"prompt_tokens": tokens(prompt.String()), "completion_tokens": tokens(text), "total_tokens": tokens(prompt.String()) + tokens(text)}
	s.count(ep, key, "ok")
	if !req.Stream {
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": s.now().Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": map[string]string{"role": "assistant", "content": text}, "finish_reason": "stop"}},
			"usage":   usage,
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	chunk := func(delta map[string]string, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": s.now().Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	send(chunk(map[string]string{"role": "assistant", "content": ""}, nil))
	for _, c := range chunks(text) {
		send(chunk(map[string]string{"content": c}, nil))
	}
	send(chunk(map[string]string{}, "stop"))
	send(map[string]any{"id": id, "object": "chat.completion.chunk", "created": s.now().Unix(), "model": req.Model, "choices": []any{}, "usage": usage})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// openAIKind is the error type and code OpenAI sends with a status.
func openAIKind(status int, code string) (string, string) {
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
}

func openAIError(w http.ResponseWriter, status int, typ, code, msg string) {
	var c any
	if code != "" {
		c = code
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}})
}
