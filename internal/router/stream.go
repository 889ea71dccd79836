package router

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/agentq/agentq/llmclient"
)

// ask is a request on its way down the router's policies: the caller's
// request, whether a stream is asked (Router.ChatStream), the targets a
// stream failed on midway (not asked again), and whether it may fail over
// midway at all.
type ask struct {
	llmclient.Request
	stream bool
	skip   []string
	// endMidway: a stream that fails midway ends with its target's error
	// instead of going on with the next target (Router.Provider's)
	endMidway bool
}

// answer is what comes back up: a whole answer, or for a stream its
// start (Provider, Model, Key) and the stream itself.
type answer struct {
	*llmclient.Response
	stream *Stream
}

// Stream is a routed answer arriving piece by piece: the target's stream,
// whose first piece the router read ahead before it chose the target, and
// what the router releases when the stream is closed (the call's timeout,
// a limit's lease, a budget's reservation). Close must be called in every
// case.
type Stream struct {
	st      *llmclient.Stream
	mu      sync.Mutex
	pending *string
	closers []func()
	once    sync.Once
	// resume opens the route's stream on the targets left when this one
	// fails midway (Router.stream); nil: a failure is returned.
	resume func(cause error) (*Stream, error)
	// ended, when set, hears once how the stream ended (nil: answered
	// whole; a call hook's report, call.go): at Close, after the caller
	// has read all, or when it fails.
	ended  func(err error)
	eof    bool // Recv returned io.EOF
	closed bool
}

// end reports how the stream ended, once.
func (s *Stream) end(err error) {
	s.mu.Lock()
	f := s.ended
	s.ended = nil
	s.mu.Unlock()
	if f != nil {
		f(err)
	}
}

// ErrStreamReset is what Recv returns when the stream failed midway and
// the router went on with the route's next target: the text received so
// far is void, and the next target's answer starts with the next Recv.
var ErrStreamReset = errors.New("the stream failed midway and starts again on another target")

// Recv returns the next piece of text, io.EOF after the last one, the
// call's error, or ErrStreamReset once for each target the stream failed
// over from midway.
func (s *Stream) Recv() (string, error) {
	s.mu.Lock()
	if p := s.pending; p != nil {
		s.pending = nil
		s.mu.Unlock()
		return *p, nil
	}
	st, resume := s.st, s.resume
	s.mu.Unlock()
	piece, err := st.Recv()
	switch {
	case err == nil:
		return piece, nil
	case errors.Is(err, io.EOF):
		s.mu.Lock()
		s.eof = true
		s.mu.Unlock()
		return piece, err // reported at Close: after what the caller does with the last piece
	}
	s.end(err)
	if resume == nil {
		return piece, err
	}
	next, rerr := resume(err)
	if rerr != nil {
		return "", err // the route had nothing better: this target's failure
	}
	s.mu.Lock()
	if s.closed { // closed meanwhile: the next target's stream is not wanted
		s.mu.Unlock()
		next.Close()
		return "", err
	}
	old, closers := s.st, s.closers
	s.st, s.pending, s.closers, s.resume, s.ended = next.st, next.pending, next.closers, next.resume, next.ended
	s.mu.Unlock()
	old.Close()
	for _, f := range closers {
		f()
	}
	return "", ErrStreamReset
}

// Response is the whole answer once Recv has returned io.EOF, else nil.
func (s *Stream) Response() *llmclient.Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Response()
}

// Close stops the stream and releases what the router holds for it.
func (s *Stream) Close() error {
	s.mu.Lock()
	s.closed = true // a failover under way closes what it opens
	eof := s.eof
	s.mu.Unlock()
	if eof {
		s.end(nil)
	} else {
		s.end(context.Canceled) // closed before its end: abandoned
	}
	s.once.Do(func() {
		s.mu.Lock()
		s.st.Close()
		closers := s.closers
		s.mu.Unlock()
		for _, f := range closers {
			f()
		}
	})
	return nil
}

// Collect reads the stream to its end and returns the whole answer.
func (s *Stream) Collect() (*llmclient.Response, error) {
	defer s.Close()
	for {
		if _, err := s.Recv(); err == io.EOF {
			return s.Response(), nil
		} else if err != nil && !errors.Is(err, ErrStreamReset) {
			return nil, err
		}
	}
}

// onClose adds f to what Close runs.
func (s *Stream) onClose(f func()) {
	s.mu.Lock()
	s.closers = append(s.closers, f)
	s.mu.Unlock()
}
