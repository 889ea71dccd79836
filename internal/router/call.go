package router

// One call to one target: its timeout, its span, its breaker and health
// records, its log line and its observer event.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/agentq/agentq/llmclient"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentq/agentq/internal/tracegate"
	"github.com/agentq/agentq/retry"
)

// openStream opens a stream and waits for its first piece, so that a
// target that fails before answering is treated like a failed call (the
// route moves on). The stream owns cancel from then on (Close runs it).
func openStream(ctx context.Context, p llmclient.Provider, req llmclient.Request, key string, cancel context.CancelFunc) (*answer, error) {
	st, err := p.ChatStream(ctx, req)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &Stream{st: st}
	first, err := st.Recv()
	switch {
	case err == nil:
		s.pending = &first
	case errors.Is(err, io.EOF): // an empty answer, already complete
	default:
		st.Close()
		cancel()
		return nil, err
	}
	s.onClose(cancel)
	return &answer{Response: &llmclient.Response{Provider: p.Name(), Model: req.Model, Key: key}, stream: s}, nil
}

// call makes one call with min(target timeout, time left), records it in
// the target's breaker and logs it. A streamed call counts as answered
// once its first piece arrives. The call waits at the bottom of a
// worker's deepest stack: what is done before and after it runs in
// functions of their own (callContext, recordCall), whose frames are gone
// while it waits.
func (r *Router) call(ctx context.Context, route string, t *Target, k int, req *ask, probe bool) (*answer, error) {
	cctx, cancel, span, timeout := r.callContext(ctx, route, t, req)
	if span != nil {
		defer span.End()
	}
	start := r.now()
	var (
		resp *answer
		err  error
	)
	if req.stream {
		resp, err = openStream(cctx, t.Provider, req.Request, keyName(t.Provider, k), cancel)
	} else {
		var a *llmclient.Response
		if a, err = t.Provider.Chat(cctx, req.Request); err == nil {
			resp = &answer{Response: a}
		}
		cancel()
	}
	return r.recordCall(ctx, route, t, req, probe, span, start, timeout, resp, err)
}

// callContext is the call's context: its timeout, min(target timeout,
// time left), and its span (nil when traces are off).
//
//go:noinline
func (r *Router) callContext(ctx context.Context, route string, t *Target, req *ask) (context.Context, context.CancelFunc, trace.Span, time.Duration) {
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
		cctx, span = startCallSpan(cctx, route, *t, req.Request)
	}
	return cctx, cancel, span, timeout
}

// recordCall checks the call's answer and records how it went: its span,
// the target's breaker and health, the observer, the call hook and the
// log line.
//
//go:noinline
func (r *Router) recordCall(ctx context.Context, route string, t *Target, req *ask, probe bool, span trace.Span, start time.Time, timeout time.Duration,
	resp *answer, err error) (*answer, error) {
	dur := r.now().Sub(start)
	class, key, usage := retry.OK, "", llmclient.Usage{}
	if err == nil {
		key, usage = resp.Key, resp.Usage
		if verr := checkOutput(req.Request, resp, t.String()); verr != nil {
			err, resp = verr, nil
		}
	}
	if err != nil {
		class = retry.ClassOf(err)
		if e, ok := llmclient.AsError(err); ok {
			key = e.Key
		}
	}
	if span != nil {
		endCallSpan(span, *t, resp, usage, key, class)
	}
	r.breakers.Record(ctx, t.Provider.Name(), t.Model, class, probe)
	r.health.observe(t.Provider.Name(), t.Model, class, dur)
	r.obs.Call(route, *t, key, class, dur, usage)
	if hook := callHookOf(ctx); hook != nil {
		rep := CallReport{Route: route, Target: *t, Key: key, Class: class, Latency: dur, Usage: usage, Request: req.Request}
		if resp != nil && resp.stream != nil {
			// a stream is reported when it ends: its usage, its whole time
			resp.stream.ended = func(err error) {
				rep.Latency, rep.Class = r.now().Sub(start), retry.OK
				if err != nil {
					rep.Class = retry.ClassOf(err)
				} else if a := resp.stream.st.Response(); a != nil {
					rep.Usage, rep.Response = a.Usage, a
				}
				hook(rep)
			}
		} else {
			if resp != nil {
				rep.Response = resp.Response
			}
			hook(rep)
		}
	}
	r.log.LogAttrs(ctx, slog.LevelInfo, "llm_call",
		slog.String("route", route), slog.String("provider", t.Provider.Name()), slog.String("model", t.Model),
		slog.String("key", key), slog.Int("input_len", inputLen(req.Request)), slog.Duration("timeout", timeout),
		slog.String("class", string(class)), slog.Duration("dur", dur))
	return resp, err
}

func inputLen(req llmclient.Request) int {
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

// keyName names p's k-th key, or "" when p does not name its keys.
func keyName(p llmclient.Provider, k int) string {
	if f, ok := p.(llmclient.KeyFingerprinter); ok {
		if fps := f.KeyFingerprints(); k < len(fps) {
			return fps[k]
		}
	}
	return ""
}
