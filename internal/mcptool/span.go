package mcptool

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

var tracer = otel.Tracer("github.com/agentq/agentq/internal/mcptool")

// startSpan starts a tool call's span, a child of the step attempt's,
// named and attributed as OpenTelemetry's GenAI and MCP conventions say
// (gen_ai.tool.name is the server's name for the tool); what only agentq
// knows is in agentq.*. No argument or result is recorded.
func startSpan(ctx context.Context, server, tool string) (context.Context, trace.Span) {
	return tracer.Start(ctx, "tools/call "+tool, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", tool),
		attribute.String("mcp.method.name", "tools/call"),
		attribute.String("agentq.mcp.server", server),
	))
}

// endSpan ends a call's span with its outcome (error.type when it failed).
func endSpan(span trace.Span, outcome string, err error) {
	span.SetAttributes(attribute.String("agentq.mcp.outcome", outcome))
	if err != nil {
		span.SetAttributes(attribute.String("error.type", outcome))
		span.SetStatus(codes.Error, outcome)
	} else if outcome == "tool_error" {
		span.SetAttributes(attribute.String("error.type", "tool_error"))
	}
	span.End()
}
