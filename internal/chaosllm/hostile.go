package chaosllm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Hostile fault kinds: answers that attack the client rather than fail.
const (
	// KindTextEcho is an error status (default 401) with a text/plain body
	// that echoes the request's API key, as a gateway or proxy may; Pad
	// bytes of filler come first, to put the key across a client's cut.
	KindTextEcho = "text_echo"
	// KindEndless is a body that never ends: with no status (200) an
	// answer, or a stream that keeps sending chunks; with an error status,
	// an error body. It is written until the client goes away.
	KindEndless = "endless"
	// KindHuge is an error status (default 500) with a JSON error body of
	// Size bytes (default 50 MiB).
	KindHuge = "huge"
	// KindEmptyAnswer is a well-formed 200 with nothing in it: empty
	// content (a stream that ends without a chunk).
	KindEmptyAnswer = "empty_answer"
)

// defaultHugeSize is a huge body's size when Fault.Size is zero.
const defaultHugeSize = 50 << 20

// hostile answers the hostile kinds; ok is false for any other kind.
func (s *Server) hostile(d *dialect, w http.ResponseWriter, r *http.Request, f *Fault, key, id, model string, in int, stream bool) (ok bool) {
	ep := d.name
	switch f.Kind {
	case KindTextEcho:
		st := f.statusOf()
		s.count(ep, key, fmt.Sprintf("text_echo_%d", st), in)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(st)
		msg := f.Message
		if msg == "" {
			msg = "Unauthorized: the gateway refused API key"
		}
		io.WriteString(w, strings.Repeat(".", f.Pad)+msg+" "+f.echoed(key)+"\n")
	case KindEndless:
		st := f.statusOf()
		s.count(ep, key, fmt.Sprintf("endless_%d", st), in)
		endless(w, r, d, id, model, in, st, stream)
	case KindHuge:
		st := f.statusOf()
		s.count(ep, key, fmt.Sprintf("huge_%d", st), in)
		size := f.Size
		if size == 0 {
			size = defaultHugeSize
		}
		typ, code := d.kinds(st, f.Code)
		head, _ := json.Marshal(d.errorBody(st, typ, code, "HUGE"))
		i := bytes.Index(head, []byte("HUGE"))
		w.Header().Set("Content-Type", "application/json")
		setRetryAfter(w, f.RetryAfter)
		w.WriteHeader(st)
		w.Write(head[:i])
		writeFiller(w, r, max(0, size-int64(len(head))))
		w.Write(head[i+len("HUGE"):])
	case KindEmptyAnswer:
		s.count(ep, key, "empty_answer", in)
		if stream {
			_, end := d.stream(w, id, model, in)
			end(0)
			return true
		}
		d.answer(w, id, model, "", in, 0)
	default:
		return false
	}
	return true
}

// endless writes a body that never ends, until the client goes away.
func endless(w http.ResponseWriter, r *http.Request, d *dialect, id, model string, in, status int, stream bool) {
	if stream && status == http.StatusOK {
		chunk, _ := d.stream(w, id, model, in)
		for r.Context().Err() == nil {
			chunk(strings.Repeat("endless ", 512))
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if status == http.StatusOK {
		io.WriteString(w, `{"id":"`+id+`","object":"chat.completion","model":"`+model+`","choices":[{"index":0,"message":{"role":"assistant","content":"`)
	} else {
		io.WriteString(w, `{"error":{"type":"server_error","message":"`)
	}
	writeFiller(w, r, -1)
}

// writeFiller writes n bytes of filler (n < 0: until the client goes away
// or a write fails), flushing as it goes so the client sees a live body.
func writeFiller(w http.ResponseWriter, r *http.Request, n int64) {
	block := bytes.Repeat([]byte("x"), 32<<10)
	fl, _ := w.(http.Flusher)
	for n != 0 && r.Context().Err() == nil {
		b := block
		if n > 0 && int64(len(b)) > n {
			b = b[:n]
		}
		if _, err := w.Write(b); err != nil {
			return
		}
		if n > 0 {
			n -= int64(len(b))
		}
		if fl != nil {
			fl.Flush()
		}
	}
}
