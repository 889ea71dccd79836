package router

import (
	"io"
	"sync"

	"github.com/agentq/agentq/llmclient"
)

// ask is a request on its way down the router's policies: the caller's
// request and whether a stream is asked (Router.ChatStream).
type ask struct {
	llmclient.Request
	stream bool
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
}

// Recv returns the next piece of text, io.EOF after the last one, or the
// call's error.
func (s *Stream) Recv() (string, error) {
	s.mu.Lock()
	if p := s.pending; p != nil {
		s.pending = nil
		s.mu.Unlock()
		return *p, nil
	}
	s.mu.Unlock()
	return s.st.Recv()
}

// Response is the whole answer once Recv has returned io.EOF, else nil.
func (s *Stream) Response() *llmclient.Response { return s.st.Response() }

// Close stops the stream and releases what the router holds for it.
func (s *Stream) Close() error {
	s.once.Do(func() {
		s.st.Close()
		s.mu.Lock()
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
		} else if err != nil {
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
