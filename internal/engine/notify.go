package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hibiken/asynq"
	"gopkg.in/yaml.v3"

	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/webhook"
)

// NotifySpec asks for a signed POST when the workflow ends
// (docs/webhooks.md): notify: { url: …, events: [completed, failed] }.
type NotifySpec struct {
	URL string `yaml:"url" json:"url"`
	// Events are the ends that are notified: completed, blocked, failed,
	// timed_out, canceled; empty: all of them.
	Events []string `yaml:"events" json:"events,omitempty"`
	line   int
}

// UnmarshalYAML reads notify: and checks it: an http(s) URL, known events,
// no other field; every problem names its field and line.
func (n *NotifySpec) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind != yaml.MappingNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: notify: want a mapping with url and events", node.Line)}}
	}
	var problems []string
	bad := func(line int, field, format string, a ...any) {
		problems = append(problems, fmt.Sprintf("line %d: notify.%s: %s", line, field, fmt.Sprintf(format, a...)))
	}
	*n = NotifySpec{line: node.Line}
	for i := 0; i+1 < len(node.Content); i += 2 {
		k, v := node.Content[i], node.Content[i+1]
		var err error
		switch k.Value {
		case "url":
			err = v.Decode(&n.URL)
		case "events":
			err = v.Decode(&n.Events)
		default:
			bad(k.Line, k.Value, "unknown field (notify has url and events)")
		}
		if err != nil {
			bad(k.Line, k.Value, "%s", err)
		}
	}
	if err := webhook.CheckURL(n.URL); err != nil {
		bad(lineOr(keyLine(node, "url"), node.Line), "url", "%v", err)
	}
	if i, ev := webhook.CheckEvents(n.Events); i >= 0 {
		bad(lineOr(keyLine(node, "events"), node.Line), fmt.Sprintf("events[%d]", i), "unknown event %q (want %s)", ev, webhook.EventsHelp())
	}
	if len(problems) > 0 {
		return &yaml.TypeError{Errors: problems}
	}
	return nil
}

// wants reports whether the event is notified.
func (n *NotifySpec) wants(event string) bool {
	return n != nil && slices.Contains(webhook.Events, event) && (len(n.Events) == 0 || slices.Contains(n.Events, event))
}

// Webhooks is what the handler and the client know of the configuration's
// webhooks: block, never its secret. nil means none is configured: no
// workflow is notified, and a spec with notify: is refused.
type Webhooks struct {
	// Default notifies every workflow whose spec has no notify: of its own
	// (webhooks.url and webhooks.events); nil: none.
	Default *NotifySpec
	// MaxRetries is how often a delivery is retried before it is archived;
	// 0: 8.
	MaxRetries int
}

// Check refuses a spec that asks to be notified when w is nil (the
// configuration has no webhooks.secret to sign with): a SpecError naming
// notify, in source (the spec's file name, as ParseSpec was given it).
func (w *Webhooks) Check(source string, spec *Spec) error {
	if w != nil || spec == nil || spec.Notify == nil {
		return nil
	}
	return &SpecError{Source: source, Line: spec.Notify.line, Where: "notify",
		Msg: "webhooks are not configured (the configuration has no webhooks.secret to sign with)"}
}

// notifyOf is the notify a workflow gets: its own, or the default.
func (w *Webhooks) notifyOf(spec *Spec) *NotifySpec {
	if spec.Notify != nil {
		return spec.Notify
	}
	return w.Default
}

// notifyEnd enqueues the webhook of a workflow that reached state, when its
// notify (or the default) asks for that event and the record says the
// workflow is in that state. The event carries ids and states only: which
// steps did not finish and, for a dead step, its id and class. The handler
// calls it when a settle ends (or blocks) a workflow; the client when it
// cancels one, or fails one by discarding its dead letter.
func notifyEnd(ctx context.Context, c *asynq.Client, st *store.Store, w *Webhooks, wf string, spec *Spec, state string) error {
	if w == nil || spec == nil {
		return nil
	}
	n := w.notifyOf(spec)
	if !n.wants(state) {
		return nil
	}
	rec, err := st.Get(ctx, wf)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if rec.State != state {
		return nil // it did not end that way (Fail leaves a workflow that is not blocked alone)
	}
	ev := webhook.Event{Workflow: wf, Name: spec.Name, Event: state, State: state, URL: n.URL, At: time.Now()}
	if rec.FinishedAt != nil {
		ev.At = *rec.FinishedAt
	}
	for _, s := range rec.Steps {
		if s.State == store.StepDone {
			continue
		}
		ev.Unfinished = append(ev.Unfinished, s.ID)
		if s.State == store.StepDead && ev.Error == "" {
			ev.Error = "step " + s.ID + " dead-lettered"
			if s.Class != "" {
				ev.Error += ": " + s.Class
			}
		}
	}
	retries := w.MaxRetries
	if retries <= 0 {
		retries = webhook.DefaultMaxRetry
	}
	return webhook.Enqueue(ctx, c, ev, asynq.MaxRetry(retries), asynq.Retention(st.Retention()))
}

// notifyEnded enqueues the webhook of a workflow a settle ended (or
// blocked), when it asks for one. Enqueuing is idempotent (one task per
// workflow and event), so a settle delivered twice notifies once; a Redis
// that is restarting is waited for within the settle's time.
func (h *Handler) notifyEnded(ctx context.Context, wf string, spec *Spec, state string) {
	if h.o.Webhooks == nil {
		if spec != nil && spec.Notify.wants(state) {
			h.o.Logger.Warn("workflow not notified: its spec has notify: but this worker's configuration has no webhooks.secret", "wf", wf, "event", state)
		}
		return
	}
	err := untilStored(ctx, func() error { return notifyEnd(ctx, h.o.Client, h.st, h.o.Webhooks, wf, spec, state) })
	if err != nil {
		h.o.Logger.Error("webhook not enqueued: the workflow's end is not notified", "wf", wf, "event", state, "err", store.Excerpt(err.Error()))
	}
}
