package router

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// An LLM call's span follows OpenTelemetry's GenAI semantic conventions
// (name "chat {model}", gen_ai.* attributes), so Langfuse, Phoenix or
// Grafana read it without configuration; what only agentq knows (the
// route, the configured provider name, the key's fingerprint, the class)
// is in agentq.* attributes. No message content is recorded.

// startCallSpan starts the span of one call of req to target t on route.
func startCallSpan(ctx context.Context, route string, t Target, req llmclient.Request) (context.Context, trace.Span) {
	provider := llmclient.GenAIName(t.Provider)
	if provider == "" {
		provider = t.Provider.Name() // a provider built outside the dialect table: its own name
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameChat,
		semconv.GenAIProviderNameKey.String(provider),
		semconv.GenAIRequestModel(t.Model),
		attribute.String("agentq.route", route),
		attribute.String("agentq.provider", t.Provider.Name()),
		attribute.Int("agentq.input_len", inputLen(req)),
	}
	if req.MaxTokens > 0 {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(req.MaxTokens))
	}
	if req.Temperature != nil {
		attrs = append(attrs, semconv.GenAIRequestTemperature(*req.Temperature))
	}
	return tracer.Start(ctx, "chat "+t.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endCallSpan records the call's outcome on span: the tokens it used (an
// answer its output check refused used them too), the answering model and
// why the model stopped for an answer (resp), the class as error.type for
// a failure.
func endCallSpan(span trace.Span, t Target, resp *answer, usage llmclient.Usage, key string, class retry.Class) {
	attrs := []attribute.KeyValue{attribute.String("agentq.key", key), attribute.String("agentq.class", string(class))}
	if usage.PromptTokens+usage.CompletionTokens > 0 {
		attrs = append(attrs, semconv.GenAIUsageInputTokens(usage.PromptTokens), semconv.GenAIUsageOutputTokens(usage.CompletionTokens))
	}
	if resp == nil {
		span.SetAttributes(append(attrs, semconv.ErrorTypeKey.String(string(class)))...)
		span.SetStatus(codes.Error, string(class))
		return
	}
	model := resp.ResponseModel
	if model == "" {
		model = t.Model
	}
	attrs = append(attrs, semconv.GenAIResponseModel(model))
	if resp.FinishReason != "" {
		attrs = append(attrs, semconv.GenAIResponseFinishReasons(resp.FinishReason))
	}
	span.SetAttributes(attrs...)
}
