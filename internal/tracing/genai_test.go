package tracing_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/llmtest"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/tracing"
)

// otlpReceiver is an OTLP/HTTP trace receiver in the test's process: it
// keeps the spans the exporter sends.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || err != nil || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func attrs(s *tracepb.Span) map[string]*commonpb.AnyValue {
	out := map[string]*commonpb.AnyValue{}
	for _, kv := range s.Attributes {
		out[kv.Key] = kv.Value
	}
	return out
}

// Every LLM call's span, exported over OTLP as a collector receives it,
// carries OpenTelemetry's GenAI attributes: the operation, the dialect's
// well-known provider name (not the configured one, which stays in
// agentq.provider), the models, the tokens and the finish reason of an
// answer, error.type of a failure. On both dialects, against chaosllm
// over HTTP.
func TestLLMCallSpansFollowTheGenAIConventions(t *testing.T) {
	recv := &otlpReceiver{}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	shutdown, err := tracing.Setup(t.Context(), "agentq-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	fx := llmtest.New(t, chaosllm.Scenario{Timelines: []chaosllm.Timeline{
		{Endpoint: "openai", Phases: []chaosllm.Phase{{Requests: 1, Fault: &chaosllm.Fault{Status: 503}}, {}}}}})
	r, err := router.NewRouter([]router.Route{
		{Name: "both", Strategy: "ordered", Targets: []router.Target{
			{Provider: fx.OpenAI, Model: "m-oa", Timeout: 5 * time.Second},
			{Provider: fx.Anthropic, Model: "m-an", Timeout: 5 * time.Second}}},
		{Name: "oa", Strategy: "ordered", Targets: []router.Target{{Provider: fx.OpenAI, Model: "m-oa", Timeout: 5 * time.Second}}},
	}, routerOptions(router.RouterOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	// the first call fails over (openai 503, then anthropic answers); the
	// second is openai's answer
	for _, route := range []string{"both", "oa"} {
		req := llmtest.Ask("hello")
		req.MaxTokens = 64
		if _, err := r.Chat(context.Background(), route, req); err != nil {
			t.Fatalf("route %s: %v", route, err)
		}
	}
	if err := shutdown(t.Context()); err != nil { // flushes the batch to the receiver
		t.Fatal(err)
	}

	recv.mu.Lock()
	defer recv.mu.Unlock()
	type want struct{ name, provider, configured, model, errType string }
	wants := []want{{"chat m-oa", "openai", "oa", "m-oa", "server"}, {"chat m-an", "anthropic", "an", "m-an", ""}, {"chat m-oa", "openai", "oa", "m-oa", ""}}
	var calls []*tracepb.Span
	for _, s := range recv.spans {
		// the router's call spans (the Anthropic SDK adds a span of its
		// own under each of its calls: no agentq.route)
		if a := attrs(s); a["gen_ai.operation.name"].GetStringValue() == "chat" && a["agentq.route"] != nil {
			calls = append(calls, s)
		}
	}
	if len(calls) != len(wants) {
		t.Fatalf("%d LLM call spans exported (of %d spans), want %d", len(calls), len(recv.spans), len(wants))
	}
	for i, s := range calls {
		w, a := wants[i], attrs(s)
		where := s.Name
		if s.Name != w.name || s.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("span %d: %q of kind %v, want %q, client", i, s.Name, s.Kind, w.name)
		}
		for key, v := range map[string]string{"gen_ai.provider.name": w.provider, "gen_ai.request.model": w.model, "agentq.provider": w.configured} {
			if got := a[key].GetStringValue(); got != v {
				t.Errorf("%s: %s = %q, want %q", where, key, got, v)
			}
		}
		if got := a["gen_ai.request.max_tokens"].GetIntValue(); got != 64 {
			t.Errorf("%s: gen_ai.request.max_tokens = %d, want 64", where, got)
		}
		if w.errType != "" {
			if got := a["error.type"].GetStringValue(); got != w.errType || s.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
				t.Errorf("%s: error.type %q, status %v; want %q, error", where, got, s.Status.GetCode(), w.errType)
			}
			continue
		}
		if a["gen_ai.usage.input_tokens"].GetIntValue() <= 0 || a["gen_ai.usage.output_tokens"].GetIntValue() <= 0 {
			t.Errorf("%s: tokens %v / %v, want both above 0", where, a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"])
		}
		if got := a["gen_ai.response.model"].GetStringValue(); !strings.HasPrefix(got, w.model) {
			t.Errorf("%s: gen_ai.response.model %q, want the model that answered (%s…)", where, got, w.model)
		}
		if fr := a["gen_ai.response.finish_reasons"].GetArrayValue().GetValues(); len(fr) != 1 || fr[0].GetStringValue() == "" {
			t.Errorf("%s: gen_ai.response.finish_reasons %v, want one reason", where, fr)
		}
		if _, ok := a["error.type"]; ok {
			t.Errorf("%s: an answer has error.type %v", where, a["error.type"])
		}
	}
}

// routerOptions is o with the built-in key cooldowns and health scoring.
func routerOptions(o router.RouterOptions) router.RouterOptions {
	o.DefaultCooldown, o.MaxCooldown = defaults.KeyCooldown, defaults.KeyMaxCooldown
	h, err := router.NewHealth(nil, router.DefaultHealthConfig(), nil, nil)
	if err != nil {
		panic(err) // the built-in scoring is valid
	}
	o.Health = h
	return o
}
