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
	src    StreamSource // StreamFrom's: Recv, Response and Close are its
	events chan streamEvent
	cancel context.CancelFunc
	ctx    context.Context
	stall  time.Duration
	onErr  func(error) error // turns a raw error into *Error

	started time.Time
	now     func() time.Time
	// red removes secrets from the text; the end of the text that may
	// be a secret's start is held until more follows (release), so a
	// secret split across pieces is seen whole.
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

// holdBack is the most of a stream's text held until more follows:
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
	if s.src != nil {
		return s.src.Recv()
	}
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

// release hands out what is held and delta, redacted, but for the end
// that may still turn out to be a secret, or a key, once more text
// follows (redact's Open): ordinary text is handed out as it comes. What
// is held is cut off where no secret crosses (the text redacted in two
// parts reads as it does whole); while one does, all of it is held. Past
// holdBack bytes held, the text is handed out whole, redacted; at the
// end, all of it. Called with s.mu held.
func (s *Stream) release(delta string, final bool) string {
	text := s.held + delta
	var out string
	if final {
		out, s.held = s.red.String(text), ""
	} else {
		cut := len(text) - s.red.Open(text)
		for cut > 0 && cut < len(text) && !utf8.RuneStart(text[cut]) {
			cut--
		}
		head, tail := s.red.Part(text[:cut]), text[cut:]
		whole := tail == "" || head+s.red.Part(tail) == s.red.Part(text) // no secret across the cut
		switch {
		case len(text) > holdBack && (len(tail) > holdBack || !whole):
			out, s.held = s.red.Part(text), ""
		case !whole:
			s.held = text
			return ""
		default:
			out, s.held = head, tail
		}
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
	if s.src != nil {
		return s.src.Response()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resp
}

// Close stops the stream and releases its connection.
func (s *Stream) Close() error {
	if s.src != nil {
		return s.src.Close()
	}
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
