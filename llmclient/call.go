package llmclient

// One call to one target: its timeout, its span, its breaker and health
// records, its log line and its observer event.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentq/agentq/internal/tracegate"
	"github.com/agentq/agentq/retry"
)

// openStream opens a stream and waits for its first piece, so that a
// target that fails before answering is treated like a failed call (the
// route moves on). The stream owns cancel from then on (Close runs it).
func openStream(ctx context.Context, p Provider, req Request, cancel context.CancelFunc) (*Response, error) {
	st, err := p.ChatStream(ctx, req)
	if err != nil {
		cancel()
		return nil, err
	}
	first, err := st.Recv()
	switch {
	case err == nil:
		st.unread(first)
	case errors.Is(err, io.EOF): // an empty answer, already complete
	default:
		st.Close()
		cancel()
		return nil, err
	}
	st.onClose(cancel)
	k, _ := ctx.Value(keyCtx{}).(int)
	return &Response{Provider: p.Name(), Model: req.Model, Key: fingerprintOf(p, k), stream: st}, nil
}

// call makes one call with min(target timeout, time left), records it in
// the target's breaker and logs it. A streamed call counts as answered
// once its first piece arrives.
func (r *Router) call(ctx context.Context, route string, t Target, req Request, probe bool) (*Response, error) {
	timeout := t.Timeout
	if dl, ok := ctx.Deadline(); ok {
		if left := dl.Sub(r.now()); timeout == 0 || left < timeout {
			timeout = left
		}
	}
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, timeout)
	}
	var span trace.Span
	if tracegate.On() { // else every span is a no-op: not started at all
		cctx, span = tracer.Start(cctx, "agentq.llm_call", trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("agentq.route", route), attribute.String("agentq.provider", t.Provider.Name()),
				attribute.String("agentq.model", t.Model), attribute.Int("agentq.input_len", inputLen(req))))
		defer span.End()
	}
	start := r.now()
	var (
		resp *Response
		err  error
	)
	if req.stream {
		resp, err = openStream(cctx, t.Provider, req, cancel)
	} else {
		resp, err = t.Provider.Chat(cctx, req)
		cancel()
	}
	dur := r.now().Sub(start)
	class, key, usage := retry.OK, "", Usage{}
	if err == nil {
		key, usage = resp.Key, resp.Usage
		if verr := checkOutput(req, resp, t.String()); verr != nil {
			err, resp = verr, nil
		}
	}
	if err != nil {
		class = retry.ClassOf(err)
		if e, ok := AsError(err); ok {
			key = e.Key
		}
	}
	if span != nil {
		span.SetAttributes(attribute.String("agentq.key", key), attribute.String("agentq.class", string(class)),
			attribute.Int("agentq.tokens.prompt", usage.PromptTokens), attribute.Int("agentq.tokens.completion", usage.CompletionTokens))
		if err != nil {
			span.SetStatus(codes.Error, string(class))
		}
	}
	r.breakers.record(ctx, t.Provider.Name(), t.Model, class, probe)
	r.health.observe(t.Provider.Name(), t.Model, class, dur)
	r.obs.Call(route, t, key, class, dur, usage)
	r.log.LogAttrs(ctx, slog.LevelInfo, "llm_call",
		slog.String("route", route), slog.String("provider", t.Provider.Name()), slog.String("model", t.Model),
		slog.String("key", key), slog.Int("input_len", inputLen(req)), slog.Duration("timeout", timeout),
		slog.String("class", string(class)), slog.Duration("dur", dur))
	return resp, err
}

func inputLen(req Request) int {
	n := len(req.System)
	for _, m := range req.Messages {
		n += len(m.Content)
	}
	return n
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
