package chaoscli_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves goroutines behind (idle HTTP
// keep-alive connections aside).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}
