package mcptool

import (
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// conn is one connection to a server: its MCP session and, for a stdio
// server, its process.
type conn struct {
	sess   *mcp.ClientSession
	proc   *process    // nil: an HTTP server
	frames *frameLimit // flags a message over the bound
	gone   chan struct{}

	mu     sync.Mutex
	reason string // why it is gone
	once   sync.Once
}

// lost marks the connection gone, for reason (the first one given).
func (c *conn) lost(reason string) {
	c.once.Do(func() {
		c.mu.Lock()
		c.reason = reason
		c.mu.Unlock()
		close(c.gone)
	})
}

// watchSession marks the connection lost when its session ends, saying
// why (a message over the bound, the session's error, or its end).
func (c *conn) watchSession() {
	err := c.sess.Wait()
	switch {
	case c.frames.exceeded():
		c.lost(c.frames.error().Error())
	case err != nil:
		c.lost("the session ended: " + err.Error())
	default:
		c.lost("the session ended")
	}
}

// why says why the connection is gone.
func (c *conn) why() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// alive reports whether the connection is still up.
func (c *conn) alive() bool {
	select {
	case <-c.gone:
		return false
	default:
		return true
	}
}

// stop ends the connection: the session closes (a stdio server's stdin
// with it) and a process that does not exit within stopGrace is killed.
func (c *conn) stop() {
	done := make(chan struct{})
	go func() { _ = c.sess.Close(); close(done) }()
	if c.proc != nil {
		c.proc.stop(stopGrace)
	}
	select {
	case <-done:
	case <-c.gone:
	}
	c.lost("stopped by the worker")
}
