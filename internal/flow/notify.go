package flow

import (
	"context"
	"errors"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/webhook"
)

// Webhooks is what the handler and the client know of the configuration's
// webhooks: block, never its secret. nil means none is configured: no
// workflow is notified, and a spec with notify: is refused.
type Webhooks struct {
	// Default notifies every workflow whose spec has no notify: of its own
	// (webhooks.url and webhooks.events); nil: none.
	Default *spec.NotifySpec
	// MaxRetries is how often a delivery is retried before it is archived;
	// 0: 8.
	MaxRetries int
}

// Check refuses a spec that asks to be notified when w is nil (the
// configuration has no webhooks.secret to sign with): a SpecError naming
// notify, in source (the spec's file name, as ParseSpec was given it).
func (w *Webhooks) Check(source string, wspec *spec.Spec) error {
	if w != nil || wspec == nil || wspec.Notify == nil {
		return nil
	}
	return &spec.SpecError{Source: source, Line: spec.NotifyLine(wspec.Notify), Where: "notify",
		Msg: "webhooks are not configured (the configuration has no webhooks.secret to sign with)"}
}

// notifyOf is the notify a workflow gets: its own, or the default.
func (w *Webhooks) notifyOf(wspec *spec.Spec) *spec.NotifySpec {
	if wspec.Notify != nil {
		return wspec.Notify
	}
	return w.Default
}

// NotifyEnd enqueues the webhook of a workflow that reached state, when its
// notify (or the default) asks for that event and the record says the
// workflow is in that state. The event carries ids and states only: which
// steps did not finish and, for a dead step, its id and class. The handler
// calls it when a settle ends (or blocks) a workflow; the client when it
// cancels one, or fails one by discarding its dead letter.
func NotifyEnd(ctx context.Context, c *asynq.Client, st *store.Store, w *Webhooks, wf string, wspec *spec.Spec, state string) error {
	if w == nil || wspec == nil {
		return nil
	}
	n := w.notifyOf(wspec)
	if !spec.NotifyWants(n, state) {
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
	ev := webhook.Event{Workflow: wf, Name: wspec.Name, Event: state, State: state, URL: n.URL, At: time.Now()}
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
	return webhook.Enqueue(ctx, c, ev, st.Retention(), asynq.MaxRetry(retries))
}
