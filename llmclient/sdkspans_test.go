package llmclient_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/llmclient"
)

// The Anthropic SDK's own tracing is off in a provider agentq builds,
// whatever the environment says: with its spans and their content turned
// on (ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=content), a call emits
// no SDK span (which would carry the prompt and duplicate agentq's span of
// the call) and sends no trace context of one.
func TestAnthropicSDKEmitsNoSpans(t *testing.T) {
	t.Setenv("ANTHROPIC_OPEN_TELEMETRY", "true")
	t.Setenv("ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE", "content")
	t.Setenv("ANTHROPIC_OPEN_TELEMETRY_PROPAGATION", "true")
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		otel.SetTextMapPropagator(prevProp)
		_ = tp.Shutdown(context.Background())
	})

	srv, err := chaosllm.New(chaosllm.Scenario{}, chaosllm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		headers []string
	)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		headers = append(headers, r.Header.Get("traceparent"))
		mu.Unlock()
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	p, err := llmclient.NewProvider("anthropic", llmclient.Options{Name: "an", BaseURL: hs.URL, Keys: []string{goodKey}})
	if err != nil {
		t.Fatal(err)
	}

	// inside a recording span of the caller's, as a step's call is
	ctx, parent := tp.Tracer("test").Start(context.Background(), "step")
	const secret = "the secret plan for the quarter"
	if _, err := p.Chat(ctx, ask(secret)); err != nil {
		t.Fatal(err)
	}
	s, err := p.ChatStream(ctx, ask(secret))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Collect(); err != nil {
		t.Fatal(err)
	}
	parent.End()

	for _, span := range exp.GetSpans() {
		if span.Name != "step" {
			t.Errorf("span %q (scope %q) besides the caller's", span.Name, span.InstrumentationScope.Name)
		}
		for _, a := range span.Attributes {
			if strings.Contains(a.Value.String(), secret) {
				t.Errorf("span %q carries the prompt in %s", span.Name, a.Key)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(headers) != 2 {
		t.Fatalf("%d requests, want 2", len(headers))
	}
	for _, h := range headers {
		if h != "" {
			t.Errorf("a request carried traceparent %q: the SDK traced it", h)
		}
	}
}

// docs/configuration.md says the SDK's tracing variables change nothing.
func TestConfigurationDocSaysTheSDKsTracingIsOff(t *testing.T) {
	data, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(string(data)), " ")
	for _, want := range []string{
		"The Anthropic SDK's own tracing is off in every client agentq builds",
		"`ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=content`",
		"a call has one span, agentq's",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/configuration.md does not say %q", want)
		}
	}
}
