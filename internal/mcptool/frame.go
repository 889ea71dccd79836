package mcptool

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
)

// maxFrameBytes bounds one message a server sends (a line of a stdio
// server, an HTTP answer or one of its events), from limits.max_output_bytes:
// a tool's result the step could keep, JSON-escaped twice over, and room
// for a long tool list.
func maxFrameBytes(maxResult int) int { return 2*maxResult + 1<<20 }

// errFrameTooLarge is a server's message over maxFrameBytes.
var errFrameTooLarge = errors.New("message too large")

// frameLimit flags a message over its bound; the reader it wraps then
// fails, which closes the connection.
type frameLimit struct {
	max  int
	over atomic.Bool
}

// exceeded reports whether a message went over the bound.
func (f *frameLimit) exceeded() bool { return f != nil && f.over.Load() }

func (f *frameLimit) error() error {
	return fmt.Errorf("%w: the server sent a message of more than %d bytes (twice limits.max_output_bytes and 1 MiB)", errFrameTooLarge, f.max)
}

// lines bounds each newline-delimited message of r (a stdio server's
// stdout).
func (f *frameLimit) lines(r io.ReadCloser) io.ReadCloser { return &lineLimit{r: r, f: f} }

type lineLimit struct {
	r io.ReadCloser
	f *frameLimit
	n int // bytes since the last newline
}

func (l *lineLimit) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for _, b := range p[:n] {
		if b == '\n' {
			l.n = 0
			continue
		}
		if l.n++; l.n > l.f.max {
			l.f.over.Store(true)
			return 0, l.f.error()
		}
	}
	return n, err
}

func (l *lineLimit) Close() error { return l.r.Close() }

// events bounds each event of a server-sent event stream (an HTTP
// server's answer as a stream): the bytes between blank lines.
func (f *frameLimit) events(r io.ReadCloser) io.ReadCloser { return &eventLimit{r: r, f: f} }

type eventLimit struct {
	r      io.ReadCloser
	f      *frameLimit
	n      int
	prevNL bool
}

func (e *eventLimit) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	for _, b := range p[:n] {
		switch b {
		case '\r':
		case '\n':
			if e.prevNL {
				e.n = 0
			}
			e.prevNL = true
		default:
			e.prevNL = false
			if e.n++; e.n > e.f.max {
				e.f.over.Store(true)
				return 0, e.f.error()
			}
		}
	}
	return n, err
}

func (e *eventLimit) Close() error { return e.r.Close() }

// body bounds an HTTP answer's body (a JSON answer is one message).
func (f *frameLimit) body(r io.ReadCloser) io.ReadCloser { return &bodyLimit{r: r, f: f} }

type bodyLimit struct {
	r io.ReadCloser
	f *frameLimit
	n int
}

func (b *bodyLimit) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if b.n += n; b.n > b.f.max {
		b.f.over.Store(true)
		return 0, b.f.error()
	}
	return n, err
}

func (b *bodyLimit) Close() error { return b.r.Close() }
