package mcptool

import (
	"context"
	"fmt"
	"mime"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// dialHTTP reaches a streamable HTTP server (its headers on every
// request, each answer or event bounded) and makes MCP's handshake.
func (s *server) dialHTTP(ctx context.Context) (*conn, error) {
	frames := &frameLimit{max: maxFrameBytes(s.o.MaxResultBytes)}
	headers := make(http.Header, len(s.cfg.Headers))
	for k, v := range s.cfg.Headers {
		headers.Set(k, v.Reveal())
	}
	hc := &http.Client{Transport: &headerTransport{base: s.transport(), headers: headers, frames: frames}}
	// each answer is bounded here (MaxEventSize: the SDK's bound off)
	t := &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, MaxEventSize: -1}
	sess, err := s.client.Connect(ctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("the MCP handshake with its URL failed: %w", err)
	}
	c := &conn{sess: sess, frames: frames, gone: make(chan struct{})}
	go c.watchSession()
	return c, nil
}

// transport is the server's own connection pool.
func (s *server) transport() http.RoundTripper {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rt == nil {
		s.rt = http.DefaultTransport.(*http.Transport).Clone()
	}
	return s.rt
}

// headerTransport sends the configured headers with every request and
// bounds each JSON answer's body.
type headerTransport struct {
	base    http.RoundTripper
	headers http.Header
	frames  *frameLimit
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header[k] = v
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	switch mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt {
	case "application/json":
		resp.Body = t.frames.body(resp.Body)
	case "text/event-stream":
		resp.Body = t.frames.events(resp.Body)
	}
	return resp, nil
}
