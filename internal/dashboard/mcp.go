package dashboard

import (
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentq/agentq/internal/mcpserve"
)

// mcpHandler serves agentq's MCP tools (internal/mcpserve) at POST /mcp
// over streamable HTTP, stateless: every request stands alone (no
// Mcp-Session-Id, nothing kept between requests, any replica answers), and
// a tool call's progress notifications come on its own response stream.
// GET and DELETE are not served (405).
//
// guard has checked it as any API request: the Host, the cross-site
// check, and the token (Authorization: Bearer, or a signed-in session).
// A read-only dashboard lists only the read tools, and answers a call to
// another with a tool error (code read_only). A request body over
// mcpserve.MaxMessageBytes of the limits is refused with 413. Waits
// (submit_workflow with wait) end when the dashboard shuts down; at most
// mcpserve.DefaultMaxWaiting wait at once (each reads its workflow's log
// every 200ms), one past it returns at once.
func (s *Server) mcpHandler() http.Handler {
	srv, err := mcpserve.New(s.client, mcpserve.Options{
		ReadOnly: s.o.ReadOnly,
		By:       "mcp",
		Stop:     s.streams,
	})
	if err != nil { // the tools' Go types do not make schemas: a test catches it
		s.o.Logger.Error("dashboard: the MCP endpoint is off", "err", err)
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "the MCP endpoint is off: " + err.Error()})
		})
	}
	lim := s.o.Config.Limits
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		MaxRequestBodyBytes: mcpserve.MaxMessageBytes(lim.MaxSpecBytes, lim.MaxSignalBytes),
		// guard checks the Host against the dashboard's names (a proxy's
		// too), which the SDK's loopback-only check would refuse
		DisableLocalhostProtection: true,
		// a client that goes away ends its call (a wait) where the
		// protocol lets the request's end say so
		PropagateRequestCancellation: true,
	})
}
