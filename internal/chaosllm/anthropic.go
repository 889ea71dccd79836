package chaosllm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

type anthropicRequest struct {
	Model     string `json:"model"`
	MaxTokens int    `json:"max_tokens"`
	System    json.RawMessage
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream bool `json:"stream"`
}

// contentText reads a message's content: a string or a list of blocks.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &blocks)
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl.Text)
	}
	return b.String()
}

func (s *Server) anthropic(w http.ResponseWriter, r *http.Request) {
	const ep = "anthropic"
	key := keyOf(r)
	var req anthropicRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&req); err != nil || req.Model == "" || req.MaxTokens <= 0 {
		s.count(ep, key, "bad_request")
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "request body is not a messages request (model and max_tokens are required)")
		return
	}
	if !s.keyAccepted(key) {
		s.count(ep, key, "unauthorized")
		anthropicError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	}
	d := s.decide(ep)
	if !wait(r, d.latency) {
		s.count(ep, key, "client_gone")
		return
	}
	id := s.nextID(ep)
	w.Header().Set("request-id", id)
	if f := d.fault; f != nil {
		s.count(ep, key, fmt.Sprintf("status_%d", f.Status))
		setRetryAfter(w, f.RetryAfter)
		typ := f.Type
		if typ == "" {
			typ = anthropicKind(f.Status)
		}
		anthropicError(w, f.Status, typ, fmt.Sprintf("chaosllm: scripted %d in phase %q", f.Status, d.phase))
		return
	}
	var prompt strings.Builder
	for _, m := range req.Messages {
		prompt.WriteString(contentText(m.Content))
		prompt.WriteString("\n")
	}
	text := Reply(prompt.String())
	in, out := tokens(prompt.String()), tokens(text)
	s.count(ep, key, "ok")
	if !req.Stream {
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": req.Model,
			"content":     []any{map[string]string{"type": "text", "text": text}},
			"stop_reason": "end_turn", "stop_sequence": nil,
			"usage": map[string]int{"input_tokens": in, "output_tokens": out},
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	send := func(event string, v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if fl != nil {
			fl.Flush()
		}
	}
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": in, "output_tokens": 1}}})
	send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]string{"type": "text", "text": ""}})
	for _, c := range chunks(text) {
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "text_delta", "text": c}})
	}
	send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": map[string]int{"output_tokens": out}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// anthropicKind is the error type Anthropic sends with a status.
func anthropicKind(status int) string {
	switch status {
	case 400, 422:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	default:
		return "api_error"
	}
}

func anthropicError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
}
