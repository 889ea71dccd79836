package tracegate_test

import (
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentq/agentq/internal/tracegate"
)

func TestOnOnceAProviderIsInstalled(t *testing.T) {
	if tracegate.On() {
		t.Fatal("On before any tracer provider was installed")
	}
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(t.Context()) }()
	otel.SetTracerProvider(tp)
	if !tracegate.On() {
		t.Fatal("not On after a tracer provider was installed")
	}
}
