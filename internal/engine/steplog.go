package engine

import (
	"context"
	"log/slog"

	"github.com/agentq/agentq/internal/flow"
)

// stepLogger returns base with a step's wf and step attributes, attached
// only when a record is logged: most attempts log nothing, and attaching
// attributes up front costs the redacting handler a copy per task.
func stepLogger(base *slog.Logger, wf, step string) *slog.Logger {
	return slog.New(deferredAttrs{h: base.Handler(), attrs: []slog.Attr{slog.String("wf", flow.BoundID(wf)), slog.String("step", flow.BoundID(step))}})
}

// deferredAttrs is a slog.Handler that hands its attributes to the
// handler it wraps at each record (or group) instead of at once.
type deferredAttrs struct {
	h     slog.Handler
	attrs []slog.Attr
}

func (d deferredAttrs) Enabled(ctx context.Context, l slog.Level) bool { return d.h.Enabled(ctx, l) }

func (d deferredAttrs) Handle(ctx context.Context, r slog.Record) error {
	return d.h.WithAttrs(d.attrs).Handle(ctx, r)
}

func (d deferredAttrs) WithAttrs(as []slog.Attr) slog.Handler {
	return deferredAttrs{h: d.h, attrs: append(d.attrs[:len(d.attrs):len(d.attrs)], as...)}
}

func (d deferredAttrs) WithGroup(name string) slog.Handler {
	return d.h.WithAttrs(d.attrs).WithGroup(name)
}
