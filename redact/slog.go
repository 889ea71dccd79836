package redact

import (
	"context"
	"log/slog"
	"sync"
)

// MaxLogValue bounds each string a redacting log handler passes on.
const MaxLogValue = 4 << 10

// Handler wraps h so that every record's message and every string, error
// or Stringer attribute (in groups too) is redacted by r and cut to
// MaxLogValue bytes before h sees it: whatever a provider sends back, a log
// line carries no secret and stays a few KiB.
func Handler(h slog.Handler, r *Redactor) slog.Handler {
	if rh, ok := h.(*handler); ok {
		return &handler{next: rh.resolved(), r: rh.r.Merge(r)}
	}
	return &handler{next: h, r: r}
}

type handler struct {
	next slog.Handler
	r    *Redactor
	// pending are attributes added by WithAttrs, redacted and passed on
	// to next only when a record is written (most loggers built per task
	// never write one): ready then holds next with them.
	pending []slog.Attr
	once    *sync.Once
	ready   slog.Handler
}

// resolved is next with the pending attributes, redacted.
func (h *handler) resolved() slog.Handler {
	if len(h.pending) == 0 {
		return h.next
	}
	h.once.Do(func() {
		clean := make([]slog.Attr, len(h.pending))
		for i, a := range h.pending {
			clean[i] = h.attr(a)
		}
		h.ready = h.next.WithAttrs(clean)
	})
	return h.ready
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.Truncate(rec.Message, MaxLogValue), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.resolved().Handle(ctx, out)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return h
	}
	pending := append(append(make([]slog.Attr, 0, len(h.pending)+len(as)), h.pending...), as...)
	return &handler{next: h.next, r: h.r, pending: pending, once: new(sync.Once)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.resolved().WithGroup(name), r: h.r}
}

func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.Truncate(v.String(), MaxLogValue))
	case slog.KindGroup:
		g := v.Group()
		clean := make([]any, len(g))
		for i, x := range g {
			clean[i] = h.attr(x)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, h.r.Truncate(x.Error(), MaxLogValue))
		case interface{ String() string }:
			return slog.String(a.Key, h.r.Truncate(x.String(), MaxLogValue))
		case []byte:
			return slog.String(a.Key, h.r.Truncate(string(x), MaxLogValue))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
