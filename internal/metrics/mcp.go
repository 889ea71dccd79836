package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// mcpMetrics are the MCP servers' (internal/mcptool): calls by server,
// tool and outcome, their duration, and the servers' connections. Tools
// are those the configured servers list, so the labels stay bounded.
type mcpMetrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	starts   *prometheus.CounterVec
}

func newMCPMetrics(reg *prometheus.Registry) *mcpMetrics {
	m := &mcpMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentq_mcp_calls_total",
			Help: "MCP tool calls by server, tool and outcome (ok, tool_error, unreachable, timeout, protocol_error, too_large, breaker_open, not_sent, canceled)."},
			[]string{"server", "tool", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentq_mcp_call_duration_seconds",
			Help: "MCP tool call duration, waits for a slot and a server's start included.", Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}},
			[]string{"server", "tool"}),
		starts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentq_mcp_server_connections_total",
			Help: "MCP server connections by server and result: started (a stdio server started, an HTTP one reached), failed (could not be), exited (lost: the process exited or the session ended)."},
			[]string{"server", "result"}),
	}
	reg.MustRegister(m.calls, m.duration, m.starts)
	return m
}

// MCPCall counts one MCP tool call (mcptool.Observer).
func (m *Metrics) MCPCall(server, tool, outcome string, d time.Duration) {
	m.mcp.calls.WithLabelValues(server, tool, outcome).Inc()
	m.mcp.duration.WithLabelValues(server, tool).Observe(d.Seconds())
}

// MCPStart counts an MCP server's connection made, failed or lost
// (mcptool.Observer).
func (m *Metrics) MCPStart(server, result string) {
	m.mcp.starts.WithLabelValues(server, result).Inc()
}
