// Package tracing sets up optional OpenTelemetry tracing: spans for each
// workflow, step attempt and LLM call, exported over OTLP/HTTP when
// OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) is set, off
// otherwise. The exporter reads the standard OTEL_* variables.
package tracing

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdkresource "go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"

	"github.com/agentq/agentq/internal/flow"
)

// Setup installs a tracer provider exporting to the OTLP endpoint in the
// environment, for service (e.g. "agentq-worker"). Without an endpoint it
// installs nothing and returns a no-op shutdown.
func Setup(ctx context.Context, service string, lookup func(string) (string, bool)) (shutdown func(context.Context) error, err error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	_, a := lookup("OTEL_EXPORTER_OTLP_ENDPOINT")
	_, b := lookup("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if !a && !b {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	tp := NewProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(sdkresource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(service))))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return tp.Shutdown, nil
}

// NewProvider is a tracer provider whose ids follow agentq's workflows:
// a workflow's trace id and root span id derive from its id, so every step
// attempt, in any worker, joins the workflow's trace without carrying
// anything but ids.
func NewProvider(opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(append(opts, sdktrace.WithIDGenerator(flow.TraceIDs()))...)
}
