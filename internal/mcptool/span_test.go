package mcptool

import (
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentq/agentq/internal/config"
)

// Each call has a span named and attributed as OpenTelemetry's GenAI and
// MCP conventions say: gen_ai.tool.name is the tool, the server in
// agentq.mcp.server; a tool's own error is error.type tool_error.
func TestCallSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	p := newPool(t, map[string]config.MCPServer{"local": stdioServer(t.TempDir())}, &syncBuffer{}, nil, 1<<20)
	if _, _, err := call(t, p, "local", "echo", `{"text":"x"}`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := call(t, p, "local", "fail", `{"text":"no"}`); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	for i, want := range []map[string]string{
		{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "echo", "mcp.method.name": "tools/call", "agentq.mcp.server": "local", "agentq.mcp.outcome": "ok"},
		{"gen_ai.tool.name": "fail", "agentq.mcp.outcome": "tool_error", "error.type": "tool_error"},
	} {
		s := spans[i]
		got := map[string]string{}
		for _, kv := range s.Attributes() {
			got[string(kv.Key)] = kv.Value.String()
		}
		if s.Name() != "tools/call "+want["gen_ai.tool.name"] {
			t.Errorf("span %d: name %q", i, s.Name())
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("span %s: %s = %q, want %q", s.Name(), k, got[k], v)
			}
		}
	}
}
