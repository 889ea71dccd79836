package tracing_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel"

	"github.com/agentq/agentq/internal/tracing"
)

func TestOffWithoutAnEndpoint(t *testing.T) {
	before := otel.GetTracerProvider()
	stop, err := tracing.Setup(context.Background(), "agentq-test", func(string) (string, bool) { return "", false })
	if err != nil || stop(context.Background()) != nil || otel.GetTracerProvider() != before {
		t.Fatal("tracing was set up without an endpoint")
	}
}

func TestExportsOverOTLPHTTP(t *testing.T) {
	var got atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" && r.URL.Path == "/v1/traces" {
			got.Add(1)
		}
	}))
	defer hs.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", hs.URL)
	prev := otel.GetTracerProvider()
	defer otel.SetTracerProvider(prev)
	stop, err := tracing.Setup(context.Background(), "agentq-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("test").Start(context.Background(), "one")
	span.End()
	if err := stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got.Load() == 0 {
		t.Fatal("no spans reached the OTLP endpoint")
	}
}
