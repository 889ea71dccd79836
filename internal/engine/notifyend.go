package engine

import (
	"context"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// notifyEnded tells the parent step of a child workflow a settle ended
// (flow.TellParent), and enqueues the webhook of a workflow a settle ended
// (or blocked), when it asks for one. Enqueuing is idempotent (one task per
// workflow and event), so a settle delivered twice notifies once; a Redis
// that is restarting is waited for within the settle's time.
func (h *Handler) notifyEnded(ctx context.Context, wf string, wspec *spec.Spec, state string) {
	h.notifyEndedOf(ctx, wf, wspec, state, nil)
}

// notifyEndedOf is notifyEnded after a settle: when it ended the
// workflow it read its parent link (res.ParentRead), told without
// reading it again.
func (h *Handler) notifyEndedOf(ctx context.Context, wf string, wspec *spec.Spec, state string, res *store.Settled) {
	tell := func() error { return flow.TellParent(ctx, h.o.Client, h.st, wf, state) }
	if res != nil && res.ParentRead {
		tell = func() error { return flow.TellParentOf(ctx, h.o.Client, h.st, wf, state, res.Parent) }
	}
	if err := untilStored(ctx, tell); err != nil {
		h.o.Logger.Error("a child workflow's end was not told to its parent step: it waits until its own deadline, a cancel or a rerun",
			"wf", wf, "state", state, "err", store.Excerpt(err.Error()))
	}
	if h.o.Webhooks == nil {
		if wspec != nil && spec.NotifyWants(wspec.Notify, state) {
			h.o.Logger.Warn("workflow not notified: its spec has notify: but this worker's configuration has no webhooks.secret", "wf", wf, "event", state)
		}
		return
	}
	err := untilStored(ctx, func() error { return flow.NotifyEnd(ctx, h.o.Client, h.st, h.o.Webhooks, wf, wspec, state) })
	if err != nil {
		h.o.Logger.Error("webhook not enqueued: the workflow's end is not notified", "wf", wf, "event", state, "err", store.Excerpt(err.Error()))
	}
}
