package mcptool

import "time"

// Observer hears what the servers do (the worker's metrics).
type Observer interface {
	// MCPCall is one tools/call: outcome is ok, tool_error (the tool's
	// isError), unreachable, timeout, protocol_error, too_large,
	// breaker_open, not_sent (its side-effect mark could not be kept),
	// canceled or error.
	MCPCall(server, tool, outcome string, d time.Duration)
	// MCPStart is a connection made (started), failed to be made
	// (failed), or lost (exited).
	MCPStart(server, result string)
}

type nopObserver struct{}

func (nopObserver) MCPCall(string, string, string, time.Duration) {}
func (nopObserver) MCPStart(string, string)                       {}
