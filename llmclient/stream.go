package llmclient

import (
	"context"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentq/agentq/redact"
)

// Stream is an answer arriving piece by piece. Recv returns the next piece
// of text and io.EOF once the provider has sent its final event; Response
// then returns the whole answer with its usage. Close releases the
// connection and must be called in every case.
//
// A stream's tool calls are read whole at its end (Response.ToolCalls):
// their arguments arrive in pieces that mean nothing alone, so Recv hands
// out only text. At most maxStreamedToolCalls calls of at most
// maxToolArgumentBytes arguments each are read; more fails the stream.
type Stream struct {
	events chan streamEvent
	cancel context.CancelFunc
	ctx    context.Context
	stall  time.Duration
	onErr  func(error) error // turns a raw error into *Error

	started time.Time
	now     func() time.Time
	// red removes secrets from the text; a piece is handed out only once
	// holdBack bytes of text follow it, so a secret split across pieces
	// is seen whole.
	red  *redact.Redactor
	held string          // text not handed out yet, as it came
	out  strings.Builder // the text handed out: the answer's Text

	mu   sync.Mutex
	text strings.Builder
	resp *Response
	err  error
	once sync.Once
}

type streamEvent struct {
	delta string
	final *Response // set on the final event (usage etc.)
	err   error
}

// streamSource yields raw pieces from an SDK stream. It returns a final
// response (without Text) when the provider marked the end, io.EOF never.
type streamSource func() (delta string, final *Response, err error)

// streamOpener sends the request; it runs inside the stream's goroutine so
// that the stall limit covers the wait for the response headers too.
type streamOpener func() (src streamSource, closeSrc func(), err error)

// holdBack is how much of a stream's text is held until more follows:
// longer than any secret (and its base64 form) the redactor knows.
const holdBack = 512

func newStream(ctx context.Context, cancel context.CancelFunc, stall time.Duration, now func() time.Time, red *redact.Redactor, open streamOpener, onErr func(error) error) *Stream {
	s := &Stream{events: make(chan streamEvent), cancel: cancel, ctx: ctx, stall: stall, onErr: onErr, started: now(), now: now, red: red}
	go func() {
		src, closeSrc, err := open()
		if err != nil {
			select {
			case s.events <- streamEvent{err: err}:
			case <-ctx.Done():
			}
			return
		}
		defer closeSrc()
		for {
			delta, final, err := src()
			ev := streamEvent{delta: delta, final: final, err: err}
			select {
			case s.events <- ev:
			case <-ctx.Done():
				return
			}
			if err != nil || final != nil {
				return
			}
		}
	}()
	return s
}

// Recv returns the next piece of text, io.EOF after the last one, or the
// call's error (an *Error).
func (s *Stream) Recv() (string, error) {
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return "", err
	}
	s.mu.Unlock()
	var (
		stall <-chan time.Time
		timer *time.Timer
	)
	if s.stall > 0 {
		timer = time.NewTimer(s.stall)
		defer timer.Stop()
		stall = timer.C
	}
	for {
		select {
		case ev := <-s.events:
			if timer != nil { // the stream is alive: a piece held back, or one of tool calls, counts
				timer.Reset(s.stall)
			}
			switch {
			case ev.err != nil:
				return "", s.fail(s.onErr(ev.err))
			case ev.final != nil:
				s.mu.Lock()
				s.text.WriteString(ev.delta)
				if s.text.Len() == 0 && len(ev.final.ToolCalls) == 0 {
					s.mu.Unlock()
					return "", s.fail(s.onErr(errEmptyAnswer))
				}
				piece := s.release(ev.delta, true)
				r := *ev.final
				r.Text = s.out.String()
				r.Latency = s.now().Sub(s.started)
				s.resp = &r
				s.err = io.EOF
				s.mu.Unlock()
				return piece, nil
			case ev.delta == "":
				continue
			default:
				s.mu.Lock()
				s.text.WriteString(ev.delta)
				piece := s.release(ev.delta, false)
				s.mu.Unlock()
				if piece == "" {
					continue // held until more text follows
				}
				return piece, nil
			}
		case <-stall:
			s.cancel()
			return "", s.fail(s.onErr(ErrStreamStalled))
		case <-s.ctx.Done():
			return "", s.fail(s.onErr(s.ctx.Err()))
		}
	}
}

// release hands out what is held and delta, redacted. Text with no
// secret in it is handed out but its last holdBack bytes (a secret may be
// arriving there); a window that holds a secret (whole, or a run of 8 or
// more of its characters) is handed out whole, redacted, so no secret is
// ever cut in two by what is handed out and what is held; at the end, all
// of it. Called with s.mu held.
func (s *Stream) release(delta string, final bool) string {
	text := s.held + delta
	var out string
	switch red := s.red.Part(text); {
	case final:
		out, s.held = s.red.String(text), ""
	case red != text:
		out, s.held = red, ""
	default:
		cut := len(text) - holdBack
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		if cut <= 0 {
			s.held = text
			return ""
		}
		out, s.held = text[:cut], text[cut:]
	}
	s.out.WriteString(out)
	return out
}

func (s *Stream) fail(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil || s.err == io.EOF {
		s.err = err
	}
	return s.err
}

// Response is the whole answer once Recv has returned io.EOF, else nil.
func (s *Stream) Response() *Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resp
}

// Close stops the stream and releases its connection.
func (s *Stream) Close() error {
	s.once.Do(s.cancel)
	return nil
}

// Collect reads the stream to its end and returns the whole answer.
func (s *Stream) Collect() (*Response, error) {
	defer s.Close()
	for {
		if _, err := s.Recv(); err == io.EOF {
			return s.Response(), nil
		} else if err != nil {
			return nil, err
		}
	}
}

// Bounds on the tool calls a stream may carry: a provider that sends
// endless calls or arguments fails the stream instead of filling memory.
const (
	maxStreamedToolCalls = 128
	maxToolArgumentBytes = 1 << 20
)
