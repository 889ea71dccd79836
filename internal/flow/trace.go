package flow

import (
	"context"
	"crypto/rand"
	"crypto/sha256"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentq/agentq/internal/tracegate"
	"github.com/agentq/agentq/tasks"
)

var tracer = otel.Tracer("github.com/agentq/agentq/internal/engine")

// workflowIDs are a workflow's trace id and root span id.
func workflowIDs(wf string) (trace.TraceID, trace.SpanID) {
	sum := sha256.Sum256([]byte("agentq workflow " + wf))
	var t trace.TraceID
	var s trace.SpanID
	copy(t[:], sum[:16])
	copy(s[:], sum[16:24])
	return t, s
}

type rootIDsKey struct{}

// TraceIDs is an id generator for the SDK's tracer provider: the span
// started for a workflow (by Submit) gets the ids derived from its id;
// every other span gets random ids.
func TraceIDs() sdktrace.IDGenerator { return idGen{} }

type idGen struct{}

func (idGen) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if wf, ok := ctx.Value(rootIDsKey{}).(string); ok {
		return workflowIDs(wf)
	}
	var t trace.TraceID
	var s trace.SpanID
	_, _ = rand.Read(t[:])
	_, _ = rand.Read(s[:])
	return t, s
}

func (idGen) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	var s trace.SpanID
	_, _ = rand.Read(s[:])
	return s
}

// WorkflowSpan records a workflow's submission as its trace's root span.
func WorkflowSpan(ctx context.Context, wf, name string, steps int) {
	if !tracegate.On() {
		return
	}
	_, span := tracer.Start(context.WithValue(trace.ContextWithSpanContext(ctx, trace.SpanContext{}), rootIDsKey{}, wf),
		"agentq.workflow", trace.WithNewRoot(),
		trace.WithAttributes(attribute.String("agentq.workflow", wf), attribute.String("agentq.workflow.name", name), attribute.Int("agentq.steps", steps)))
	span.End()
}

// StepContext starts a step attempt's span as a child of its workflow's
// root span, whichever worker runs it.
func StepContext(ctx context.Context, p tasks.Payload, route string, attempt int) (context.Context, trace.Span) {
	if !tracegate.On() { // every span would be a no-op: none is started
		return ctx, noop.Span{}
	}
	t, s := workflowIDs(p.Workflow)
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: t, SpanID: s, TraceFlags: trace.FlagsSampled, Remote: true})
	return tracer.Start(trace.ContextWithRemoteSpanContext(ctx, parent), "agentq.step",
		trace.WithAttributes(attribute.String("agentq.workflow", p.Workflow), attribute.String("agentq.step", p.Step),
			attribute.String("agentq.route", route), attribute.Int("agentq.attempt", attempt)))
}
