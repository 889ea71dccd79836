package chaosllm

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// request is what chaosllm reads of a chat request.
type request struct {
	model, prompt string
	stream        bool
	json          bool           // structured output was asked for
	schema        map[string]any // its JSON Schema, if one was sent
	tools         []offeredTool
	// a tool conversation: turn is 1 + the assistant messages it holds,
	// results every tool result in it, fresh those after the last
	// assistant message (the results of its calls); toolTalk says the
	// request offers tools or holds tool calls or results
	turn     int
	results  []toolResult
	fresh    []toolResult
	toolTalk bool
}

// dialect is what differs between the two wire formats.
type dialect struct {
	name string
	// parse reads a request, or says why it is not one.
	parse func(body []byte) (request, error)
	// errorBody is the JSON error document for a status.
	errorBody func(status int, typ, code, msg string) any
	// kinds is the error type and code the provider sends with a status.
	kinds func(status int, code string) (typ, outCode string)
	// answer writes a whole answer.
	answer func(w http.ResponseWriter, id, model, text string, in, out int)
	// toolAnswer writes a whole answer that calls tools, with text before
	// the calls unless it is empty.
	toolAnswer func(w http.ResponseWriter, id, model, text string, calls []toolCall, in, out int)
	// toolStream is toolAnswer as a stream: the text in chunks, then each
	// call, its arguments in two pieces.
	toolStream func(w http.ResponseWriter, id, model, text string, calls []toolCall, in, out int)
	// stream writes the start of a stream and returns a function per chunk
	// and one that ends the stream.
	stream func(w http.ResponseWriter, id, model string, in int) (chunk func(string), end func(out int))
	// streamError writes an error event into a started stream.
	streamError func(w http.ResponseWriter, typ, msg string)
	// authStatus is what a rejected key gets.
	// authError is what a rejected key gets (OpenAI echoes the key, as
	// some providers and proxies do: clients must scrub it).
	authError func(key string) (status int, body any)
}

func (s *Server) serve(d *dialect, w http.ResponseWriter, r *http.Request) {
	ep := d.name
	key := keyOf(r)
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	var req request
	if err == nil {
		req, err = d.parse(body)
	}
	model, prompt, stream := req.model, req.prompt, req.stream
	if err != nil {
		s.count(ep, key, "bad_request", 0)
		writeJSON(w, http.StatusBadRequest, d.errorBody(400, "invalid_request_error", "", err.Error()))
		return
	}
	in := tokens(prompt)
	if !s.keyAccepted(key) {
		if s.hideAuth() {
			s.count(ep, key, "empty_500", in)
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		s.count(ep, key, "unauthorized", in)
		status, b := d.authError(key)
		writeJSON(w, status, b)
		return
	}
	s.enter(ep)
	defer s.leave(ep)
	s.enter("model:" + model)
	defer s.leave("model:" + model)
	dec := s.decide(ep, key)
	if !wait(r, dec.latency) {
		s.count(ep, key, "client_gone", in)
		return
	}
	id := s.nextID(ep)
	w.Header().Set("x-request-id", id)
	w.Header().Set("request-id", id)
	text := Reply(prompt)
	if len(req.results) > 0 {
		text = finalText(req.results)
	}
	if req.json {
		text = jsonAnswer(req.schema, text)
	}
	if a, ok := s.answerText(ep, prompt); ok {
		text = a
	}
	if f := dec.fault; f != nil {
		if bad, ok := badOutput(f.Kind, req, text); ok {
			outcome := f.Kind
			if !req.json {
				outcome = "ok" // nothing to break in a plain-text answer
			}
			s.count(ep, key, outcome, in)
			text = bad
		} else {
			s.applyFault(d, w, r, f, dec, key, id, model, text, in, stream)
			return
		}
	} else {
		s.count(ep, key, "ok", in)
		s.recordAnswer(prompt)
	}
	out := tokens(text)
	calls, callText := s.toolMove(req, id)
	s.countToolTurn(ep, req, len(calls))
	if len(calls) > 0 {
		out = tokens(callText)
		for _, c := range calls {
			out += tokens(c.args)
		}
		if stream {
			d.toolStream(w, id, model, callText, calls, in, out)
		} else {
			d.toolAnswer(w, id, model, callText, calls, in, out)
		}
		return
	}
	if !stream {
		d.answer(w, id, model, text, in, out)
		return
	}
	if end := s.sendChunks(d, w, r, dec, id, model, chunks(text), in); end != nil {
		end(out)
	}
}

// sendChunks starts a stream and sends cs, dec.chunkEvery apart; it
// returns what ends the stream, nil if the client left midway.
func (s *Server) sendChunks(d *dialect, w http.ResponseWriter, r *http.Request, dec decision, id, model string, cs []string, in int) func(int) {
	chunk, end := d.stream(w, id, model, in)
	for i, c := range cs {
		if i > 0 && !wait(r, dec.chunkEvery) {
			return nil
		}
		chunk(c)
		s.countChunk(d.name)
	}
	return end
}

func (s *Server) applyFault(d *dialect, w http.ResponseWriter, r *http.Request, f *Fault, dec decision, key, id, model, text string, in int, stream bool) {
	phase := dec.phase
	if s.hostile(d, w, r, f, key, id, model, in, stream) {
		return
	}
	ep := d.name
	msg := f.Message
	if msg == "" {
		msg = fmt.Sprintf("chaosllm: scripted %s in phase %q", faultName(f), phase)
	}
	switch f.Kind {
	case "", KindStatus:
		s.count(ep, key, fmt.Sprintf("status_%d", f.Status), in)
		setRetryAfter(w, f.RetryAfter)
		typ, code := f.Type, f.Code
		if typ == "" {
			typ, code = d.kinds(f.Status, code)
		}
		writeJSON(w, f.Status, d.errorBody(f.Status, typ, code, msg))
	case KindEmpty:
		s.count(ep, key, fmt.Sprintf("empty_%d", f.statusOf()), in)
		w.WriteHeader(f.statusOf())
	case KindHTML:
		st := f.statusOf()
		s.count(ep, key, fmt.Sprintf("html_%d", st), in)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(st)
		fmt.Fprintf(w, "<html>\r\n<head><title>%d %s</title></head>\r\n<body>\r\n<center><h1>%d %s</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n",
			st, http.StatusText(st), st, http.StatusText(st))
	case KindMalformed:
		s.count(ep, key, "malformed", in)
		broken := `{"id": "` + id + `", "choices": [{"index": 0, "message": {"role": "assistant", "content": "trunc`
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, "event: message_start\ndata: "+broken+"\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, broken)
	case KindReset, KindRefuse:
		outcome := "reset"
		if f.Kind == KindRefuse {
			outcome = "refused"
		}
		s.count(ep, key, outcome, in)
		if stream && f.Kind == KindReset && s.sendChunks(d, w, r, dec, id, model, firstChunks(text, cmp.Or(f.Chunks, 2)), in) == nil {
			return
		}
		abort(w)
	case KindHang:
		s.count(ep, key, "hang", in)
		<-r.Context().Done()
	case KindStreamError:
		s.count(ep, key, "stream_error", in)
		typ := f.Type
		if typ == "" {
			typ, _ = d.kinds(529, "")
		}
		if !stream {
			writeJSON(w, http.StatusOK, d.errorBody(529, typ, f.Code, msg))
			return
		}
		if s.sendChunks(d, w, r, dec, id, model, firstChunks(text, cmp.Or(f.Chunks, 2)), in) != nil {
			d.streamError(w, typ, msg)
		}
	}
}

func faultName(f *Fault) string {
	if f.Kind == "" || f.Kind == KindStatus {
		return fmt.Sprint(f.Status)
	}
	return f.Kind
}

func firstChunks(text string, n int) []string {
	c := chunks(text)
	if len(c) > n {
		c = c[:n]
	}
	return c
}

// abort closes the connection under a response without finishing it; with
// SO_LINGER 0 the peer sees a reset.
func abort(w http.ResponseWriter) {
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		return // HTTP/2: the response just ends early
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// sse writes one server-sent event and flushes it.
func sse(w http.ResponseWriter, event string, v any) {
	b, _ := json.Marshal(v)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
}

func promptOf(parts []string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p)
		b.WriteString("\n")
	}
	return b.String()
}
