package mcptool

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/engine"
)

// server is one configured MCP server: its connection, made on first use
// and again after it is lost (with backoff), its tool list, its slots and
// its breaker.
type server struct {
	name   string
	cfg    config.MCPServer
	o      *Options
	client *mcp.Client
	slots  chan struct{} // a call holds one while it runs
	brk    serverBreaker

	mu       sync.Mutex
	cur      *conn         // nil: none up
	dialing  chan struct{} // closed when the connect under way ends
	failures int           // connections failed or lost since the last call that went through
	next     time.Time     // no connect before this (the backoff)
	tools    []engine.MCPTool
	listed   bool   // tools is the current list
	version  uint64 // bumped whenever the list may have changed
	closed   bool
	rt       http.RoundTripper // an HTTP server's connections
}

func newServer(name string, cfg config.MCPServer, o *Options) *server {
	s := &server{name: name, cfg: cfg, o: o, slots: make(chan struct{}, max(cfg.Concurrency, 1)), brk: newServerBreaker(o.Breakers, name)}
	s.client = mcp.NewClient(&mcp.Implementation{Name: "agentq", Version: "1"}, &mcp.ClientOptions{
		Logger: o.Logger.With("mcp_server", name),
		// the list is read again at the next step that offers the tools
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { s.invalidate() },
	})
	return s
}

// Backoff between connects after a failure: restartBase doubling to
// restartMax.
const (
	restartBase = 500 * time.Millisecond
	restartMax  = 30 * time.Second
)

// connection returns the server's connection, making it if there is none
// (after the backoff's wait, if ctx allows it).
func (s *server) connection(ctx context.Context) (*conn, error) {
	for {
		s.mu.Lock()
		switch {
		case s.closed:
			s.mu.Unlock()
			return nil, &unreachable{server: s.name, msg: "the worker is stopping"}
		case s.cur != nil && !s.cur.alive(): // gone, its watch not yet run
			c := s.cur
			s.mu.Unlock()
			s.forget(c)
			continue
		case s.cur != nil:
			c := s.cur
			s.mu.Unlock()
			return c, nil
		case s.dialing != nil:
			ch := s.dialing
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		wait := time.Until(s.next)
		ch := make(chan struct{})
		s.dialing = ch
		s.mu.Unlock()

		c, err := s.dial(ctx, wait)

		s.mu.Lock()
		s.dialing = nil
		close(ch)
		if err != nil {
			s.failures++
			s.next = time.Now().Add(backoff(s.failures))
			s.mu.Unlock()
			return nil, err
		}
		if s.closed {
			s.mu.Unlock()
			c.stop()
			return nil, &unreachable{server: s.name, msg: "the worker is stopping"}
		}
		s.cur, s.listed = c, false
		s.version++
		s.mu.Unlock()
		go s.watch(c)
		return c, nil
	}
}

func backoff(failures int) time.Duration {
	d := restartBase
	for i := 1; i < failures && d < restartMax; i++ {
		d *= 2
	}
	return min(d, restartMax)
}

// dial waits wait (the backoff), then connects: starts the command, or
// reaches the URL, and makes MCP's handshake.
func (s *server) dial(ctx context.Context, wait time.Duration) (*conn, error) {
	if wait > 0 {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return nil, &unreachable{server: s.name, msg: fmt.Sprintf("it failed or exited just before; the next try is in %s", wait.Round(time.Millisecond))}
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	var (
		c   *conn
		err error
	)
	if s.cfg.Stdio() {
		c, err = s.dialStdio(ctx)
	} else {
		c, err = s.dialHTTP(ctx)
	}
	if err != nil {
		s.o.Observer.MCPStart(s.name, "failed")
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &unreachable{server: s.name, msg: s.o.Redact(err.Error()), cause: err}
	}
	s.o.Observer.MCPStart(s.name, "started")
	return c, nil
}

// watch forgets c once it is gone (the process exited, the session
// ended): the next call connects again, after the backoff.
func (s *server) watch(c *conn) {
	<-c.gone
	s.forget(c)
}

// drop ends c, which broke under a call, and forgets it.
func (s *server) drop(c *conn, why string) {
	c.lost(why)
	s.forget(c)
	go c.stop()
}

// forget ends c's turn as the server's connection, once: the next call
// connects again, after the backoff.
func (s *server) forget(c *conn) {
	s.mu.Lock()
	mine := s.cur == c && !s.closed
	if mine {
		s.cur = nil
		s.failures++
		s.next = time.Now().Add(backoff(s.failures))
		s.version++
	}
	s.mu.Unlock()
	if mine {
		s.o.Logger.Warn("MCP server connection lost: it is started or reached again at the next call", "mcp_server", s.name, "why", s.o.Redact(c.why()))
		s.o.Observer.MCPStart(s.name, "exited")
	}
}

// went notes a call that went through: the next loss restarts at once.
func (s *server) went() {
	s.mu.Lock()
	s.failures = 0
	s.mu.Unlock()
}

// invalidate forgets the tool list (the server said it changed).
func (s *server) invalidate() {
	s.mu.Lock()
	s.listed = false
	s.version++
	s.mu.Unlock()
}

// listTools returns the server's tools: the list kept, or the server's.
func (s *server) listTools(ctx context.Context) ([]engine.MCPTool, error) {
	s.mu.Lock()
	if s.listed && s.cur != nil {
		tools := s.tools
		s.mu.Unlock()
		return tools, nil
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout.D())
	defer cancel()
	ok, probe := s.brk.allow(ctx)
	if !ok {
		return nil, s.brk.openError(s.name)
	}
	c, err := s.connection(ctx)
	if err != nil {
		err = s.classify(ctx, "tools/list", err, nil)
		s.brk.record(ctx, err, probe)
		return nil, err
	}
	s.mu.Lock()
	version := s.version
	s.mu.Unlock()
	var tools []engine.MCPTool
	for t, err := range c.sess.Tools(ctx, nil) {
		if err != nil {
			cerr := s.classify(ctx, "tools/list", err, c)
			s.brk.record(ctx, cerr, probe)
			if isUnreachable(cerr) || isTooLarge(cerr) {
				s.drop(c, cerr.Error())
			}
			return nil, cerr
		}
		schema, err := json.Marshal(t.InputSchema)
		if err != nil {
			perr := &protocolError{server: s.name, msg: fmt.Sprintf("tool %q: its input schema does not encode as JSON", t.Name)}
			s.brk.record(ctx, perr, probe) // it answered: a probe's verdict
			return nil, perr
		}
		tools = append(tools, engine.MCPTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	s.brk.record(ctx, nil, probe)
	s.mu.Lock()
	if s.version == version && s.cur == c {
		s.tools, s.listed = tools, true
	}
	s.mu.Unlock()
	return tools, nil
}

// call makes one tools/call within the server's timeout and slots.
func (s *server) call(ctx context.Context, tool string, args json.RawMessage, started func(context.Context) error) (res engine.MCPResult, err error) {
	begun := time.Now()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout.D())
	defer cancel()
	ctx, span := startSpan(ctx, s.name, tool)
	outcome := "ok"
	defer func() {
		s.o.Observer.MCPCall(s.name, tool, outcome, time.Since(begun))
		endSpan(span, outcome, err)
	}()
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	case <-ctx.Done():
		err = s.classify(ctx, "tools/call", ctx.Err(), nil)
		outcome = outcomeOf(err)
		return res, fmt.Errorf("waiting for one of its %d slots (concurrency): %w", cap(s.slots), err)
	}
	// the breaker is asked with a slot held: a probe taken is sent at once
	ok, probe := s.brk.allow(ctx)
	if !ok {
		outcome = "breaker_open"
		return res, s.brk.openError(s.name)
	}
	c, err := s.connection(ctx)
	if err != nil {
		err = s.classify(ctx, "tools/call", err, nil)
		outcome = outcomeOf(err)
		s.brk.record(ctx, err, probe)
		return res, err
	}
	if started != nil {
		if err := started(ctx); err != nil {
			outcome = "not_sent"
			s.brk.record(ctx, context.Canceled, probe) // no verdict: a probe's slot goes back
			return res, err
		}
	}
	r, err := c.sess.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		err = s.classify(ctx, "tools/call", err, c)
		outcome = outcomeOf(err)
		s.brk.record(ctx, err, probe)
		if isUnreachable(err) || isTooLarge(err) {
			s.drop(c, err.Error())
		}
		return res, err
	}
	s.brk.record(ctx, nil, probe)
	s.went()
	if r.IsError {
		outcome = "tool_error"
	}
	return engine.MCPResult{Content: resultText(r), IsError: r.IsError}, nil
}

// close stops the server's connection; no new one is made.
func (s *server) close() {
	s.mu.Lock()
	s.closed = true
	c, rt := s.cur, s.rt
	s.cur = nil
	s.mu.Unlock()
	if c != nil {
		c.stop()
	}
	if t, ok := rt.(*http.Transport); ok {
		t.CloseIdleConnections()
	}
}
