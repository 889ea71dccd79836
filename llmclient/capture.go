package llmclient

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// bodyExcerptLimit bounds how much of an error body an Error keeps.
const bodyExcerptLimit = 512

// capture records what the SDKs do not expose on their errors: the response
// status and headers (Retry-After, request ids) and the start of an error
// body. It rides in the request's context; captureTransport fills it.
type capture struct {
	mu     sync.Mutex
	status int
	header http.Header
	body   []byte
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

// captureTransport wraps an http.RoundTripper and fills the request's capture.
type captureTransport struct{ base http.RoundTripper }

func (t captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	c, _ := req.Context().Value(captureKey{}).(*capture)
	if err != nil || c == nil {
		return resp, err
	}
	c.mu.Lock()
	c.status = resp.StatusCode
	c.header = resp.Header.Clone()
	c.mu.Unlock()
	if resp.StatusCode >= 400 {
		resp.Body = &teeBody{ReadCloser: resp.Body, c: c}
	}
	return resp, nil
}

// teeBody copies the first bodyExcerptLimit bytes read into the capture.
type teeBody struct {
	io.ReadCloser
	c *capture
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.c.mu.Lock()
		if room := bodyExcerptLimit - len(b.c.body); room > 0 {
			b.c.body = append(b.c.body, p[:min(n, room)]...)
		}
		b.c.mu.Unlock()
	}
	return n, err
}

// newHTTPClient is the client both adapters use: no client-wide timeout (each
// call's context carries its deadline) and the capturing transport.
func newHTTPClient(base http.RoundTripper) *http.Client {
	if base == nil {
		base = http.DefaultTransport
	}
	return &http.Client{Transport: captureTransport{base: base}}
}

// RetryAfterCap bounds any Retry-After a provider sends.
const RetryAfterCap = 10 * time.Minute

// ParseRetryAfter reads retry-after-ms (milliseconds), then Retry-After as
// seconds or as an HTTP date relative to now. It returns zero when neither is
// present or parseable, and never more than RetryAfterCap.
func ParseRetryAfter(h http.Header, now time.Time) time.Duration {
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
	return min(d, RetryAfterCap)
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
