package chaosllm

import (
	"net"
	"net/http"
	"sync/atomic"
)

// ConnCounter counts the connections an http.Server accepts: set the
// server's ConnState to its Count. The bench and the tests read it to
// tell whether a client reused its connections or dialed again for each
// call.
type ConnCounter struct{ n atomic.Int64 }

// Count is an http.Server's ConnState hook: it counts each new
// connection.
func (c *ConnCounter) Count(_ net.Conn, s http.ConnState) {
	if s == http.StateNew {
		c.n.Add(1)
	}
}

// Opened is how many connections were accepted so far.
func (c *ConnCounter) Opened() int64 { return c.n.Load() }
