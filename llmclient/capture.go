package llmclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// bodyExcerptLimit bounds how much of an error body an Error keeps.
const bodyExcerptLimit = 512

// errorBodyLimit is where a non-2xx body ends: the SDKs read error bodies
// whole, so a provider (or a proxy in front of it) that sends a huge or
// never-ending error page would otherwise take the worker's memory. The
// body is cut by an early EOF, not a read error, so the SDK still reports
// the status and the failure keeps its class (a 429 stays rate_limited).
const errorBodyLimit = 64 << 10

// DefaultMaxResponseBytes is how much of a 2xx answer (or of a stream's
// whole body) an adapter reads when Options.MaxResponseBytes is zero.
const DefaultMaxResponseBytes = 2 << 20

// Answers being read are held whole by the SDKs until they decode them, so
// many large ones at once add up: all adapters of a process together hold
// at most sharedAnswerBudget bytes of non-streamed 2xx bodies being read.
// A body within its first fairShare bytes is never refused for that (small
// answers always pass); past it, a read that would go over the shared
// budget fails the call as response_too_large, which is retried later.
const (
	sharedAnswerBudget = 8 << 20
	fairShare          = 128 << 10
)

// answersInFlight counts the bytes of 2xx bodies read and not yet closed.
var answersInFlight atomic.Int64

// ErrResponseTooLarge is the read error of a 2xx body that went past the
// adapter's MaxResponseBytes. The call fails with an *Error of type
// TypeTooLarge (class server: the next target or a later retry may answer
// within bounds).
var ErrResponseTooLarge = errors.New("response body is larger than the adapter's limit")

// capture records what the SDKs do not expose on their errors: the response
// status and headers (Retry-After, request ids), the start of an error
// body, and whether an answer went past the size limit. It rides in the
// request's context; captureTransport fills it.
type capture struct {
	mu       sync.Mutex
	status   int
	header   http.Header
	body     []byte
	tooLarge bool
}

type captureKey struct{}

func withCapture(ctx context.Context) (context.Context, *capture) {
	c := &capture{}
	return context.WithValue(ctx, captureKey{}, c), c
}

func (c *capture) snapshot() (int, http.Header, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status, c.header, string(c.body)
}

func (c *capture) overLimit() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tooLarge
}

// captureTransport wraps an http.RoundTripper: it bounds every response
// body (errorBodyLimit for non-2xx, maxAnswer for 2xx) and fills the
// request's capture.
type captureTransport struct {
	base      http.RoundTripper
	maxAnswer int64
}

func (t captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	c, _ := req.Context().Value(captureKey{}).(*capture)
	if c == nil {
		c = &capture{} // a call outside an adapter method: bound it all the same
	}
	c.mu.Lock()
	c.status = resp.StatusCode
	c.header = resp.Header.Clone()
	c.mu.Unlock()
	b := &boundedBody{ReadCloser: resp.Body, c: c, left: t.maxAnswer}
	switch {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		b.left, b.tee, b.eofAtLimit = errorBodyLimit, true, true
	case !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"):
		b.shared = true // a stream is consumed as it comes; an answer is held
	}
	resp.Body = b
	if resp.ContentLength > b.left {
		resp.ContentLength = -1 // what will be read is less than announced
	}
	return resp, nil
}

// boundedBody reads at most left bytes of a response body. Past that it
// ends with io.EOF (eofAtLimit: an error body, whose status matters more
// than its tail) or with ErrResponseTooLarge (an answer, which must not be
// taken for a shorter one). tee copies the first bodyExcerptLimit bytes
// into the capture.
type boundedBody struct {
	io.ReadCloser
	c          *capture
	left       int64
	tee        bool
	eofAtLimit bool
	shared     bool  // counts against sharedAnswerBudget
	charged    int64 // bytes counted in answersInFlight
	closeOnce  sync.Once
}

func (b *boundedBody) tooLarge() error {
	b.c.mu.Lock()
	b.c.tooLarge = true
	b.c.mu.Unlock()
	return ErrResponseTooLarge
}

func (b *boundedBody) Close() error {
	b.closeOnce.Do(func() { answersInFlight.Add(-b.charged) })
	return b.ReadCloser.Close()
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.shared && b.charged+int64(len(p)) > fairShare && answersInFlight.Load()+int64(len(p)) > sharedAnswerBudget {
		return 0, b.tooLarge()
	}
	if b.left <= 0 {
		if b.eofAtLimit {
			return 0, io.EOF
		}
		// one byte more tells a body of exactly the limit from a longer one
		var one [1]byte
		if n, err := b.ReadCloser.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, b.tooLarge()
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.shared && n > 0 {
		b.charged += int64(n)
		answersInFlight.Add(int64(n))
	}
	if n > 0 && b.tee {
		b.c.mu.Lock()
		if room := bodyExcerptLimit - len(b.c.body); room > 0 {
			b.c.body = append(b.c.body, p[:min(n, room)]...)
		}
		b.c.mu.Unlock()
	}
	return n, err
}

// newHTTPClient is the client both adapters use: no client-wide timeout (each
// call's context carries its deadline) and the bounding, capturing transport.
func newHTTPClient(base http.RoundTripper, maxAnswer int64) *http.Client {
	return &http.Client{Transport: captureTransport{base: base, maxAnswer: maxAnswer}}
}

// retryAfterCap bounds any Retry-After a provider sends.
const retryAfterCap = 10 * time.Minute

// parseRetryAfter reads retry-after-ms (milliseconds), then Retry-After as
// seconds or as an HTTP date relative to now. It returns zero when neither is
// present or parseable, and never more than retryAfterCap.
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	var d time.Duration
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			d = time.Duration(ms * float64(time.Millisecond))
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); d == 0 && v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil {
			if s > 0 {
				d = time.Duration(s * float64(time.Second))
			}
		} else if t, err := http.ParseTime(v); err == nil {
			d = t.Sub(now)
		}
	}
	if d < 0 {
		return 0
	}
	return min(d, retryAfterCap)
}

// requestID reads the request id header providers send.
func requestID(h http.Header) string {
	for _, k := range []string{"x-request-id", "request-id", "anthropic-request-id"} {
		if v := h.Get(k); v != "" {
			return v
		}
	}
	return ""
}
