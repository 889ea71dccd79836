package engine_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/internal/tracing"
)

// One trace per workflow: its root span from the submit, a span per step
// attempt (from whichever worker) under it, and the LLM calls under those.
func TestTracesFollowWorkflows(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := tracing.NewProvider(sdktrace.WithSyncer(exp))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev); _ = tp.Shutdown(t.Context()) })

	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Requests: 1, Fault: &chaosllm.Fault{Status: 503}}, {}}}})
	id := e.Submit(t, e.Spec(`
name: traced
defaults: { route: solo }
steps:
  - { id: a, prompt: "one" }
  - { id: b, depends_on: [a], prompt: "two {{ .Steps.a.Output }}" }
`))
	e.Wait(t, id, 10*time.Second, store.StateCompleted)

	// the workflow completes inside b's settle, before b's span ends: the
	// spans are read until b's is there, within a deadline
	count := func() (steps map[string]int, calls int) {
		t.Helper()
		spans := exp.GetSpans()
		var root *tracetest.SpanStub
		for i := range spans {
			if spans[i].Name == "agentq.workflow" {
				root = &spans[i]
			}
		}
		if root == nil {
			t.Fatalf("no workflow span among %d", len(spans))
		}
		steps = map[string]int{}
		stepIDs := map[string]bool{}
		for _, s := range spans {
			if s.SpanContext.TraceID() != root.SpanContext.TraceID() {
				continue
			}
			switch s.Name {
			case "agentq.step":
				if s.Parent.SpanID() != root.SpanContext.SpanID() {
					t.Errorf("step span's parent %s is not the workflow span %s", s.Parent.SpanID(), root.SpanContext.SpanID())
				}
				for _, a := range s.Attributes {
					if a.Key == "agentq.step" {
						steps[a.Value.AsString()]++
					}
				}
				stepIDs[s.SpanContext.SpanID().String()] = true
			}
		}
		for _, s := range spans {
			if strings.HasPrefix(s.Name, "chat ") && s.SpanContext.TraceID() == root.SpanContext.TraceID() && stepIDs[s.Parent.SpanID().String()] {
				calls++
			}
		}
		return steps, calls
	}
	// a: a failed attempt (503) and a good one; b: one attempt
	poll.Until(t, 5*time.Second, func() (bool, string) {
		steps, calls := count()
		return steps["a"] == 2 && steps["b"] == 1 && calls == 3,
			fmt.Sprintf("step attempt spans %v and %d LLM call spans in the workflow's trace; want a×2, b×1 and 3 calls", steps, calls)
	})
}
